"""Reschedule end to end on a real server, in memory and durable (with a restart).

Timers are real here (deadlines on the wall clock are the point), with tolerant bounds:
what must stay pending has minutes to go, what must fire has a deadline well under the
polling bound.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb

from tests.delayed.helpers import EXPIRED, LONG, WATCHING, config_for, watch
from tests.durability.helpers import NAME, running

KINDS = ["memory", "durable"]


async def _state(stub: object, op_id: str) -> pb.OperationStatus:
    response = await stub.GetOperation(  # type: ignore[attr-defined]
        pb.GetOperationRequest(purgatory=NAME, operation_id=op_id)
    )
    return response.operation


async def _until_ended(stub: object, op_id: str, bound_s: float = 5.0) -> pb.OperationStatus:
    deadline = time.monotonic() + bound_s
    while True:
        status = await _state(stub, op_id)
        if status.state != WATCHING or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.05)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.parametrize("kind", KINDS)
async def test_reschedule_later_keeps_it_pending_and_survives_restart(
    kind: str, tmp_path: Path
) -> None:
    config = config_for(kind, tmp_path)
    async with running(config) as stub:
        await stub.TryCompleteElseWatch(watch("order-7", [], timeout_ms=300))
        moved = await stub.Reschedule(
            pb.RescheduleRequest(purgatory=NAME, operation_id="order-7", timeout_ms=LONG)
        )
        assert moved.operation.state == WATCHING
        assert moved.operation.due_time_ms >= _now_ms() + LONG - 5_000
        await asyncio.sleep(0.6)  # past the original 300 ms deadline
        status = await _state(stub, "order-7")
        assert (status.state, status.due_time_ms) == (WATCHING, moved.operation.due_time_ms)
        info = await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))
        assert info.purgatory.pending == 1
    if kind == "durable":
        async with running(config) as stub:
            status = await _state(stub, "order-7")
            assert (status.state, status.due_time_ms) == (WATCHING, moved.operation.due_time_ms)


@pytest.mark.parametrize("kind", KINDS)
async def test_reschedule_sooner_fires_at_the_new_due_time(kind: str, tmp_path: Path) -> None:
    config = config_for(kind, tmp_path)
    async with running(config) as stub:
        await stub.TryCompleteElseWatch(watch("soon", ["k"]))
        due = _now_ms() + 1_500
        moved = await stub.Reschedule(
            pb.RescheduleRequest(purgatory=NAME, operation_id="soon", due_time_ms=due)
        )
        assert moved.operation.due_time_ms == due
        if kind == "memory":
            status = await _until_ended(stub, "soon")
            assert status.state == EXPIRED
            assert status.complete_time_ms >= due - 20  # tick granularity
    if kind == "durable":
        # Stopped before the new deadline: the restart keeps it and fires it then.
        async with running(config) as stub:
            status = await _state(stub, "soon")
            assert status.due_time_ms == due
            status = await _until_ended(stub, "soon")
            assert status.state == EXPIRED
            assert status.complete_time_ms >= due - 20


@pytest.mark.parametrize("kind", KINDS)
async def test_reschedule_refusals(kind: str, tmp_path: Path) -> None:
    async with running(config_for(kind, tmp_path)) as stub:
        await stub.TryCompleteElseWatch(watch("done", ["k"]))
        await stub.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id="done"))
        await stub.TryCompleteElseWatch(watch("live", ["k"]))
        cases = [
            (
                pb.RescheduleRequest(purgatory=NAME, operation_id="done", timeout_ms=10),
                "FAILED_PRECONDITION",
                "ended",
            ),
            (
                pb.RescheduleRequest(purgatory=NAME, operation_id="nope", timeout_ms=10),
                "NOT_FOUND",
                "nope",
            ),
            (
                pb.RescheduleRequest(purgatory=NAME, operation_id="live"),
                "INVALID_ARGUMENT",
                "deadline",
            ),
            (
                pb.RescheduleRequest(purgatory=NAME, operation_id="", timeout_ms=10),
                "INVALID_ARGUMENT",
                "operation_id",
            ),
            (
                pb.RescheduleRequest(purgatory=NAME, operation_id="live", timeout_ms=0),
                "INVALID_ARGUMENT",
                "timeout_ms",
            ),
            (
                pb.RescheduleRequest(
                    purgatory=NAME, operation_id="live", due_time_ms=_now_ms() + 400 * 86_400_000
                ),
                "INVALID_ARGUMENT",
                "due_time_ms",
            ),
        ]
        for request, code, text in cases:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Reschedule(request)
            assert info.value.code() == getattr(grpc.StatusCode, code), request
            assert text in (info.value.details() or ""), info.value.details()
        assert (await _state(stub, "live")).state == WATCHING
