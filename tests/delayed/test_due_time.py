"""Absolute due times (due_time_ms) on registration, in memory and durable (restart)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb

from tests.delayed.helpers import EXPIRED, WATCHING, config_for
from tests.durability.helpers import NAME, running

KINDS = ["memory", "durable"]
DAY = 86_400_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _at(op_id: str, due: int, **extra: object) -> pb.TryCompleteElseWatchRequest:
    return pb.TryCompleteElseWatchRequest(
        purgatory=NAME, operation_id=op_id, keys=["k"], due_time_ms=due, **extra
    )


async def _until_ended(stub: object, op_id: str, bound_s: float = 5.0) -> pb.OperationStatus:
    deadline = time.monotonic() + bound_s
    while True:
        response = await stub.GetOperation(  # type: ignore[attr-defined]
            pb.GetOperationRequest(purgatory=NAME, operation_id=op_id)
        )
        if response.operation.state != WATCHING or time.monotonic() > deadline:
            return response.operation
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", KINDS)
async def test_due_time_fires_then_and_resends_stay_idempotent(kind: str, tmp_path: Path) -> None:
    config = config_for(kind, tmp_path)
    due = _now_ms() + 1_500
    async with running(config) as stub:
        first = await stub.TryCompleteElseWatch(_at("at", due))
        assert (first.created, first.due_time_ms, first.state) == (True, due, WATCHING)
        again = await stub.TryCompleteElseWatch(_at("at", due))
        assert (again.created, again.due_time_ms) == (False, due)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.TryCompleteElseWatch(_at("at", due + 1))
        assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
        batch = await stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(
                purgatory=NAME,
                operations=[pb.OperationSpec(operation_id="at2", keys=["k"], due_time_ms=due)],
            )
        )
        assert batch.operations[0].due_time_ms == due
    if kind == "durable":
        async with running(config) as stub:
            again = await stub.TryCompleteElseWatch(_at("at", due))
            assert (again.created, again.due_time_ms, again.state) == (False, due, WATCHING)
            status = await _until_ended(stub, "at")
            assert status.state == EXPIRED and status.complete_time_ms >= due - 20
            # After it ended (and a restart), a re-send still gets the same outcome.
        async with running(config) as stub:
            again = await stub.TryCompleteElseWatch(_at("at", due))
            assert (again.created, again.state) == (False, EXPIRED)
    else:
        async with running(config) as stub:
            await stub.TryCompleteElseWatch(_at("m", _now_ms() + 300))
            status = await _until_ended(stub, "m")
            assert status.state == EXPIRED


async def test_a_due_time_in_the_past_fires_at_once(tmp_path: Path) -> None:
    async with running(config_for("memory", tmp_path)) as stub:
        await stub.TryCompleteElseWatch(_at("late", _now_ms() - 60_000))
        assert (await _until_ended(stub, "late", 2.0)).state == EXPIRED


async def test_due_time_refusals_name_the_field(tmp_path: Path) -> None:
    async with running(config_for("memory", tmp_path)) as stub:
        cases = [
            (_at("x", _now_ms() + 400 * DAY), "due_time_ms", "horizon"),
            (_at("x", _now_ms() + 1000, timeout_ms=1000), "due_time_ms", "not both"),
        ]
        for request, field, text in cases:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.TryCompleteElseWatch(request)
            details = info.value.details() or ""
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in details and text in details, details
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.BatchTryCompleteElseWatch(
                pb.BatchTryCompleteElseWatchRequest(
                    purgatory=NAME,
                    operations=[
                        pb.OperationSpec(operation_id="a", keys=["k"], timeout_ms=1000),
                        pb.OperationSpec(
                            operation_id="b", keys=["k"], due_time_ms=_now_ms() + 400 * DAY
                        ),
                    ],
                )
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "operations[1].due_time_ms" in (info.value.details() or "")
