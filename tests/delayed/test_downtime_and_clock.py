"""Downtime and clocks.

- Operations that fell due while a durable server was down (killed with SIGKILL) expire at
  once on restart, in due-time order, each exactly once (also across a second restart).
- Absolute due times are judged on the server's wall clock when they arrive; once
  registered, every deadline runs on the monotonic clock, so a wall-clock step does not
  move it, and the client's own clock plays no part (MockTime, stepped by hand).
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
from purgatory_client import OperationState, PurgatoryClient
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server import MockTime
from purgatory_server._service import create_server

from tests.delayed.helpers import EXPIRED, WATCHING, config_for
from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME


def _events(client: PurgatoryClient, count: int) -> list[object]:
    out = []
    for event in client.subscribe(after_sequence=0):
        out.append(event)
        if len(out) == count:
            break
    return out


def test_operations_due_during_downtime_expire_at_once_in_due_order(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # Registered in this order; due in another (ids say the due rank).
    offsets = {"d3": 400, "d1": 200, "d5": 600, "d2": 300, "d0": 100, "d4": 500}
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            base = c.try_complete_else_watch([], 600_000, operation_id="anchor").create_time_ms
            base += 2_000  # everything falls due after the kill below
            for op_id, offset in offsets.items():
                c.try_complete_else_watch(["k"], 0, operation_id=op_id, due_time_ms=base + offset)
            # A reschedule (journaled) into the downtime, between d1 and d2.
            c.try_complete_else_watch(["k"], 600_000, operation_id="r")
            c.reschedule("r", due_time_ms=base + 250)
            c.try_complete_else_watch(["k"], 600_000, operation_id="later")
            assert c.get_purgatory(NAME).last_sequence == 0  # nothing fired before the kill
    finally:
        proc.kill()
    time.sleep(max(0.0, (base + 650 - time.time_ns() // 1_000_000) / 1000))
    restarted_ms = time.time_ns() // 1_000_000
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            events = _events(c, 7)
            assert [e.operation_id for e in events] == ["d0", "d1", "r", "d2", "d3", "d4", "d5"]  # type: ignore[attr-defined]
            assert all(e.state is OperationState.EXPIRED for e in events)  # type: ignore[attr-defined]
            assert [e.sequence for e in events] == list(range(1, 8))  # type: ignore[attr-defined]
            for e in events:
                # Fired on restart, not at some later tick: within seconds of it.
                assert restarted_ms <= e.complete_time_ms <= restarted_ms + 10_000  # type: ignore[attr-defined]
            assert c.get_operation("later").state is OperationState.WATCHING
            assert c.get_purgatory(NAME).last_sequence == 7
    finally:
        proc.stop()
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            # Each exactly once: the second restart replays the outcomes, fires nothing.
            info = c.get_purgatory(NAME)
            assert (info.last_sequence, info.pending) == (7, 2)
            assert c.get_operation("d3").sequence == 5
    finally:
        proc.stop()


class SteppedClock(MockTime):
    """MockTime whose wall clock can be stepped alone (an NTP step, a VM resume)."""

    def step_wall(self, ms: int) -> None:
        with self._lock:
            self._wall_offset_ms += ms


async def test_due_times_follow_the_server_clock_and_deadlines_the_monotonic_one(
    tmp_path: Path,
) -> None:
    # The server's wall clock says 2023-11-14 while this (client) machine's says otherwise:
    # a client clock years off, so anything judged on it would be glaringly wrong. A
    # relative timeout carries no client time at all; an absolute due time is taken as an
    # instant on the server's clock.
    clock = SteppedClock(wall_clock_start_ms=1_700_000_000_000)
    server, port = await create_server(
        "127.0.0.1:0", config_for("memory", tmp_path), time=clock, reaper_enabled=False
    )
    purgatory = server.registry.get(NAME)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]

    async def state(op_id: str) -> pb.OperationStatus:
        purgatory.advance_clock(0)
        got = await stub.GetOperation(pb.GetOperationRequest(purgatory=NAME, operation_id=op_id))
        return got.operation

    def watch(
        op_id: str, timeout_ms: int = 0, due_time_ms: int = 0
    ) -> pb.TryCompleteElseWatchRequest:
        return pb.TryCompleteElseWatchRequest(
            purgatory=NAME, operation_id=op_id, timeout_ms=timeout_ms, due_time_ms=due_time_ms
        )

    try:
        server_now = clock.wall_clock_ms()
        rel = await stub.TryCompleteElseWatch(watch("rel", timeout_ms=5_000))
        assert rel.create_time_ms == server_now  # the server's clock, not the client's
        absolute = await stub.TryCompleteElseWatch(watch("abs", due_time_ms=server_now + 5_000))
        assert absolute.due_time_ms == server_now + 5_000
        # The server's wall clock jumps an hour ahead: registered deadlines do not move
        # (the wheel runs on the monotonic clock) ...
        clock.step_wall(3_600_000)
        clock.sleep(4_999)
        assert (await state("rel")).state == WATCHING
        assert (await state("abs")).state == WATCHING
        # ... while a new absolute due time is judged on the stepped wall clock: what was
        # 10 s ahead before the step has passed now, and fires at once.
        late = await stub.TryCompleteElseWatch(watch("late", due_time_ms=server_now + 10_000))
        assert late.due_time_ms == server_now + 10_000
        assert (await state("late")).state == EXPIRED
        clock.sleep(1)
        assert (await state("rel")).state == EXPIRED
        assert (await state("abs")).state == EXPIRED
    finally:
        await channel.close()
        await server.stop(0.5)
