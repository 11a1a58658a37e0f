"""The crash test: SIGKILL a durable server under load, restart it, check the acks.

Each cycle starts ``python -m purgatory_server`` on the same data directory (cycling the
fsync policy always/interval/never: a process crash must lose nothing acknowledged under
any of them), runs concurrent watches with mixed conditions and timeouts, signals,
force-completes and a subscriber, kills the process with SIGKILL at a random moment, and
restarts it. Against what the clients were told (:class:`Acks`), the restarted server must
show:

- sequences 1..last with no gap or duplicate, and no operation with two outcomes;
- every event a subscriber received and every outcome a response reported, unchanged;
- every acknowledged watch either with exactly one outcome or still pending;
- probes (private key, MIN_SIGNALS(4)) pending with exactly the progress their
  acknowledged signals gave them (at most one more if a signal was in flight);
- operations that fell due while the server was down expired at once on restart.

``PURGATORY_CRASH_CYCLES`` sets the number of kill/restart cycles (default 3);
``PURGATORY_CRASH_SEED`` the random seed (default: random, printed on failure).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from tests.durability.crash_load import (
    NAME,
    PROBE_COUNT,
    Acks,
    DurableServer,
    now_ms,
    run_load,
)

logger = logging.getLogger(__name__)
CYCLES = int(os.environ.get("PURGATORY_CRASH_CYCLES", "3"))
POLICIES = ("always", "interval", "never")
WATCHING = pb.OperationState.Value("OPERATION_STATE_WATCHING")
EXPIRED = pb.OperationState.Value("OPERATION_STATE_EXPIRED")
FINAL = {2, 3, 4, 5}
AT_ONCE_MS = 2000  # tolerant bound for "expired at once" (a loaded 2-core machine)


async def _replay(stub: Any, last: int) -> list[Any]:
    events: list[Any] = []
    if not last:
        return events
    call = stub.Subscribe(pb.SubscribeRequest(purgatory=NAME, after_sequence=0), timeout=30)
    try:
        async for event in call:
            events.append(event)
            if len(events) >= last:
                break
    finally:
        call.cancel()
    return events


async def _status(stub: Any, op_id: str) -> Any:
    response = await stub.GetOperation(pb.GetOperationRequest(purgatory=NAME, operation_id=op_id))
    return response.operation


async def _status_or_lost(stub: Any, op_id: str) -> Any:
    try:
        return await _status(stub, op_id)
    except grpc.aio.AioRpcError as exc:
        if exc.code() is grpc.StatusCode.NOT_FOUND:
            raise AssertionError(f"acknowledged watch {op_id} was lost") from exc
        raise


async def _statuses(stub: Any, op_ids: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for start in range(0, len(op_ids), 200):
        chunk = op_ids[start : start + 200]
        found = await asyncio.gather(*(_status_or_lost(stub, o) for o in chunk))
        out.update(zip(chunk, found, strict=True))
    return out


async def _signal_probe(stub: Any, op_id: str) -> None:
    await stub.CheckAndComplete(
        pb.CheckAndCompleteRequest(
            purgatory=NAME, key=f"p-{op_id}", signal=pb.Signal(amount=1, source="p")
        )
    )


async def _check_probe(stub: Any, acks: Acks, op_id: str) -> None:
    """Complete a pending probe signal by signal: it must need exactly what is left."""
    acked, in_flight = acks.probe_acked[op_id], acks.probe_in_flight[op_id]
    needed = 0
    while (await _status(stub, op_id)).state == WATCHING:
        assert needed < PROBE_COUNT, f"probe {op_id} never completes"
        await _signal_probe(stub, op_id)
        needed += 1
    left = PROBE_COUNT - acked
    allowed = {left, left - 1} if in_flight else {left}
    assert needed in allowed, f"probe {op_id}: {acked} acked (+{in_flight}), needed {needed}"
    status = await _status(stub, op_id)
    assert status.result.signal_count == PROBE_COUNT
    acks.outcome(op_id, status.sequence, status.state)
    acks.count("probes pending with exact progress")


async def verify(stub: Any, acks: Acks, killed_ms: int, ready_ms: int) -> None:
    """Check the restarted server against ``acks``; then settle long-lived operations."""
    assert not acks.errors, acks.errors
    info = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
    by_op = await _check_outcomes(stub, acks, info.last_sequence)
    _check_ended_overdue(acks, by_op, killed_ms, ready_ms)
    statuses = await _check_pending(stub, acks, by_op, info.last_sequence, ready_ms)
    acks.count("acknowledged watches found pending", len(statuses))
    acks.count("outcomes checked after restart", len(by_op))
    await _settle(stub, acks, statuses, ready_ms)
    # Settled operations need no further checks; keep the still-pending short ones.
    for op_id in list(acks.watches):
        if op_id in by_op or op_id in acks.outcomes:
            del acks.watches[op_id]
            acks.probe_acked.pop(op_id, None)
            acks.probe_in_flight.pop(op_id, None)


async def _check_outcomes(stub: Any, acks: Acks, last_sequence: int) -> dict[str, Any]:
    """Every sequence once, one outcome per operation, each one as reported before the
    kill; the events by operation id."""
    events = await _replay(stub, last_sequence)
    assert [e.sequence for e in events] == list(range(1, last_sequence + 1))
    by_op: dict[str, Any] = {}
    for event in events:
        assert event.operation_id not in by_op, f"two outcomes for {event.operation_id}"
        by_op[event.operation_id] = event
        acks.event(event.sequence, event.operation_id, event.state)  # must match what was seen
    assert not acks.errors, acks.errors
    for op_id, (sequence, state) in acks.outcomes.items():
        event = by_op.get(op_id)
        assert event is not None, f"reported outcome of {op_id} lost"
        assert (event.sequence, event.state) == (sequence, state)
    return by_op


def _check_ended_overdue(acks: Acks, by_op: dict[str, Any], killed_ms: int, ready_ms: int) -> None:
    for op_id, watch in acks.watches.items():
        event = by_op.get(op_id)
        if event is None or watch.due_ms >= ready_ms or event.complete_time_ms < killed_ms:
            continue
        # Fell due while the server was down: ended on restart, at once.
        assert event.complete_time_ms <= ready_ms + AT_ONCE_MS, (op_id, event)
        if event.state == EXPIRED:
            assert event.complete_time_ms >= event.due_time_ms  # the event shows lateness
            acks.count("overdue operations expired at once")


async def _check_pending(
    stub: Any, acks: Acks, by_op: dict[str, Any], last_sequence: int, ready_ms: int
) -> dict[str, Any]:
    """Acknowledged watches without an outcome in the replay: pending unless overdue (then
    ended at once, after the replayed sequences); their statuses."""
    open_ids = [op_id for op_id in acks.watches if op_id not in by_op]
    statuses = await _statuses(stub, open_ids)
    overdue = []
    for op_id, status in statuses.items():
        watch = acks.watches[op_id]
        if status.state == WATCHING:
            if watch.due_ms < ready_ms - AT_ONCE_MS:
                overdue.append(op_id)  # must not still be pending: re-check below
        else:
            assert status.state in FINAL and status.sequence > last_sequence
            if watch.due_ms < ready_ms:
                assert status.complete_time_ms <= ready_ms + AT_ONCE_MS, (op_id, status)
                acks.count("overdue operations expired at once")
    assert not overdue, f"overdue operations still pending after restart: {overdue[:5]}"
    return statuses


async def _settle(stub: Any, acks: Acks, statuses: dict[str, Any], ready_ms: int) -> None:
    """Probes: exact progress; long-lived watches: force-completed (recorded as outcomes)."""
    for op_id, status in statuses.items():
        if acks.watches[op_id].probe:
            assert status.state == WATCHING, f"probe {op_id} ended unexpectedly: {status}"
            await _check_probe(stub, acks, op_id)
        elif status.state == WATCHING and acks.watches[op_id].due_ms > ready_ms + 60_000:
            forced = await stub.ForceComplete(
                pb.ForceCompleteRequest(purgatory=NAME, operation_id=op_id)
            )
            acks.outcome(op_id, forced.operation.sequence, forced.operation.state)


async def test_sigkill_under_load_loses_no_acknowledged_operation(tmp_path: Path) -> None:
    seed = int(os.environ.get("PURGATORY_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    log = tmp_path / "server.log"
    acks = Acks()
    server = DurableServer(data_dir, POLICIES[0], log)
    try:
        for cycle in range(CYCLES):
            port = server.wait_port()
            killed_ms = await run_load(port, acks, rng, cycle, server)
            assert acks.watches or acks.outcomes, f"seed {seed}: no load was acknowledged"
            server = DurableServer(data_dir, POLICIES[(cycle + 1) % len(POLICIES)], log)
            port = server.wait_port()
            ready_ms = now_ms()
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
            try:
                stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
                await verify(stub, acks, killed_ms, ready_ms)
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}, cycle {cycle}: {exc}") from exc
            finally:
                await channel.close()
    finally:
        server.stop()
    summary = ", ".join(f"{n} {what}" for what, n in sorted(acks.stats.items()))
    logger.info("crash test: seed %d, %d cycles, zero losses; %s", seed, CYCLES, summary)
