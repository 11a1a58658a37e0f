"""Rescheduled deadlines and cancellations of a durable purgatory survive a SIGKILL.

The server process is killed right after the calls are acknowledged: what an
acknowledged Reschedule or Cancel did must be what the restarted server shows.
"""

from __future__ import annotations

import time
from pathlib import Path

from purgatory_client import OperationSpec, OperationState, PurgatoryClient

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME

HOUR_MS = 3_600_000


def test_reschedules_and_cancellations_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            c.batch_try_complete_else_watch(
                [OperationSpec((f"k{i}",), 60_000, operation_id=f"order-{i}") for i in range(6)]
            )
            later = c.reschedule("order-0", timeout_ms=HOUR_MS)
            soon = c.reschedule("order-1", timeout_ms=300)  # due while the server is down
            at = time.time_ns() // 1_000_000 + 2 * HOUR_MS
            absolute = c.reschedule("order-2", due_time_ms=at)
            cancelled = {s.operation_id: s.sequence for s in c.cancel(["order-3", "order-4"])}
            assert set(cancelled) == {"order-3", "order-4"}
    finally:
        proc.kill()
    time.sleep(0.4)  # order-1's new deadline passes while nothing runs
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            back = c.get_operation("order-0")
            assert (back.state, back.due_time_ms) == (OperationState.WATCHING, later.due_time_ms)
            back = c.get_operation("order-2")
            assert (back.state, back.due_time_ms) == (OperationState.WATCHING, at)
            assert absolute.due_time_ms == at
            deadline = time.monotonic() + 10
            while c.get_operation("order-1").state is OperationState.WATCHING:
                assert time.monotonic() < deadline, "order-1 did not expire after the restart"
                time.sleep(0.02)
            expired = c.get_operation("order-1")
            assert expired.state is OperationState.EXPIRED
            assert expired.due_time_ms == soon.due_time_ms  # the rescheduled one, not 60 s
            for op_id, sequence in cancelled.items():
                status = c.get_operation(op_id)
                assert (status.state, status.sequence) == (OperationState.CANCELLED, sequence)
            untouched = c.get_operation("order-5")
            assert untouched.state is OperationState.WATCHING
            assert c.cancel(["order-3"]) == []  # idempotent across the restart
    finally:
        proc.stop()
