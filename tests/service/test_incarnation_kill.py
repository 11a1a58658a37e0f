"""Kill -9 an in-memory ``purgatory-server`` under a resuming subscriber (sync client):
the resumed subscription raises StreamResetError, never a silent gap."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from purgatory_client import OperationSpec, PurgatoryClient, StreamResetError


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(port: int, folder: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
    port_file = folder / f"port-{time.monotonic_ns()}"
    argv = [sys.executable, "-m", "purgatory_server", "--listen", f"127.0.0.1:{port}"]
    argv += ["--data-dir", str(folder / "data"), "--port-file", str(port_file)]
    proc = subprocess.Popen(argv, env=env, cwd=folder, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not port_file.exists():
        assert proc.poll() is None, "server exited"
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    return proc


def _complete(client: PurgatoryClient, prefix: str, n: int) -> None:
    ids = [f"{prefix}{i}" for i in range(n)]
    client.batch_try_complete_else_watch([OperationSpec((i,), 60_000, operation_id=i) for i in ids])
    client.batch_check_and_complete(ids)


def test_kill_9_and_restart_under_a_resuming_subscriber(tmp_path: Path) -> None:
    port = _free_port()
    first = _start(port, tmp_path)
    second = None
    try:
        with PurgatoryClient(f"127.0.0.1:{port}", timeout=10, trust_env=False) as client:
            stream = iter(client.subscribe(after_sequence=0))
            _complete(client, "old", 3)
            assert [next(stream).sequence for _ in range(3)] == [1, 2, 3]
            old = client.get_purgatory().incarnation
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = _start(port, tmp_path)
            _complete(client, "new", 5)  # the new stream has sequences 1..5 already
            assert client.get_purgatory().incarnation != old
            outcome: list[BaseException | int] = []

            def resume() -> None:
                try:
                    outcome.append(next(stream).sequence)
                except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                    outcome.append(exc)

            reader = threading.Thread(target=resume, daemon=True)
            reader.start()
            reader.join(30)
            assert outcome, "the subscriber neither resumed nor failed"
            assert isinstance(outcome[0], StreamResetError), outcome
            assert outcome[0].incarnation == client.get_purgatory().incarnation
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)


pytestmark = pytest.mark.timeout(90)
