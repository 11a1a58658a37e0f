"""Kill -9 an in-memory ``purgatory-server`` under a resuming subscriber (sync client):
the resumed subscription raises StreamResetError, never a silent gap."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from purgatory_client import OperationSpec, PurgatoryClient, StreamResetError

from harness import ServerProcess


def _complete(client: PurgatoryClient, prefix: str, n: int) -> None:
    ids = [f"{prefix}{i}" for i in range(n)]
    client.batch_try_complete_else_watch([OperationSpec((i,), 60_000, operation_id=i) for i in ids])
    client.batch_check_and_complete(ids)


def test_kill_9_and_restart_under_a_resuming_subscriber(tmp_path: Path) -> None:
    # In memory: the restart, on the port the first start reported, is a new incarnation.
    server = ServerProcess(tmp_path, ["--data-dir", str(tmp_path / "data")])
    try:
        server.start().wait_port()
        with PurgatoryClient(server.address, timeout=10, trust_env=False) as client:
            stream = iter(client.subscribe(after_sequence=0))
            _complete(client, "old", 3)
            assert [next(stream).sequence for _ in range(3)] == [1, 2, 3]
            old = client.get_purgatory().incarnation
            server.kill()
            server.start().wait_port()
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
        server.stop()


pytestmark = pytest.mark.timeout(90)
