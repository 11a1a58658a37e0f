"""Graceful shutdown: waiting long-polls and streams end with UNAVAILABLE at once, the
engine threads stop, and the real process exits cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    PurgatoryClient,
    ResumePolicy,
    UnavailableError,
)

from harness import ServerProcess
from tests.service.helpers import until


async def test_stop_ends_waiters_and_streams_with_unavailable(serve) -> None:  # type: ignore[no-untyped-def]
    server, port = await serve()
    async with AsyncPurgatoryClient(
        f"127.0.0.1:{port}", resume=ResumePolicy(attempts=0), purgatory="shut-1"
    ) as client:
        await client.create_purgatory("shut-1")
        waits = [asyncio.create_task(client.wait([f"k{i}"], 600_000)) for i in range(5)]
        stream = client.subscribe()
        reader = asyncio.create_task(stream.__anext__())

        async def all_in() -> bool:
            info = await client.get_purgatory()
            return info.pending == 5 and info.subscribers == 1

        await until(all_in)
        started = time.monotonic()
        await server.stop(5.0)
        elapsed = time.monotonic() - started
        results = await asyncio.gather(*waits, reader, return_exceptions=True)
    assert elapsed < 2.5, f"waiters held shutdown for {elapsed:.1f}s (grace 5s)"
    assert all(isinstance(r, UnavailableError) for r in results), results
    # The server's one reaper and executor (no thread is the purgatory's own) stopped.
    reaper = server.registry.reaper
    assert reaper is not None and reaper.thread is not None
    assert not reaper.thread.is_alive()
    assert not reaper.executor.thread.is_alive()
    assert not any(t.name.endswith("-shut-1") for t in threading.enumerate())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_process_shuts_down_gracefully_on_signal(signum: int, tmp_path: Path) -> None:
    args = ["--purgatory", "default", "--purgatory", "orders", "--grace", "3"]
    server = ServerProcess(tmp_path, [*args, "--data-dir", str(tmp_path / "data")])
    try:
        port = server.start().wait_port()
        # No re-sends after UNAVAILABLE: this is about the server ending its long-polls
        # (a re-send could even reach another test's server on the freed port).
        no_resend = ResumePolicy(attempts=0)
        with PurgatoryClient(f"127.0.0.1:{port}", timeout=10, resume=no_resend) as client:
            assert [p.name for p in client.list_purgatories()] == ["default", "orders"]
            outcome: list[BaseException] = []

            def long_poll() -> None:
                try:
                    client.wait(["k"], 600_000, purgatory="orders", timeout=30)
                except UnavailableError as exc:
                    outcome.append(exc)

            poller = threading.Thread(target=long_poll)
            poller.start()
            deadline = time.monotonic() + 10
            while client.get_purgatory("orders").pending != 1:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            server.signal(signum)
            poller.join(10)
            assert len(outcome) == 1
        assert server.wait(15) == 0, server.log_text()
    finally:
        server.stop()


def test_bad_configuration_exits_with_usage_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_option = 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "purgatory_server", "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "no_such_option" in result.stderr
