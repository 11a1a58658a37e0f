"""Cancel end to end on a real server, in memory and durable (with a restart)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb

from tests.delayed.helpers import CANCELLED, FORCED, WATCHING, config_for, watch
from tests.durability.helpers import NAME, events_after, running

KINDS = ["memory", "durable"]


def _ids(*ids: str) -> pb.CancelRequest:
    return pb.CancelRequest(purgatory=NAME, operation_ids=pb.OperationIds(ids=list(ids)))


async def _state(stub: object, op_id: str) -> pb.OperationStatus:
    response = await stub.GetOperation(  # type: ignore[attr-defined]
        pb.GetOperationRequest(purgatory=NAME, operation_id=op_id)
    )
    return response.operation


@pytest.mark.parametrize("kind", KINDS)
async def test_cancel_by_ids_is_an_outcome_and_idempotent(kind: str, tmp_path: Path) -> None:
    config = config_for(kind, tmp_path)
    async with running(config) as stub:
        for op_id in ("a", "b", "c"):
            await stub.TryCompleteElseWatch(watch(op_id, ["k"]))
        await stub.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id="c"))
        first = await stub.Cancel(_ids("a", "c", "unknown"))
        assert [s.operation_id for s in first.cancelled] == ["a"]
        assert first.cancelled[0].state == CANCELLED
        assert first.cancelled[0].sequence == 2
        assert first.cancelled[0].complete_time_ms > 0
        again = await stub.Cancel(_ids("a", "c"))
        assert list(again.cancelled) == []
        assert (await _state(stub, "b")).state == WATCHING
        events = await events_after(stub, 0, 2)
        assert [(e.operation_id, e.state) for e in events] == [("c", FORCED), ("a", CANCELLED)]
    if kind == "durable":
        async with running(config) as stub:
            status = await _state(stub, "a")
            assert (status.state, status.sequence) == (CANCELLED, 2)
            assert (await _state(stub, "b")).state == WATCHING
            assert list((await stub.Cancel(_ids("a"))).cancelled) == []
            assert [s.operation_id for s in (await stub.Cancel(_ids("b"))).cancelled] == ["b"]
            assert (await _state(stub, "b")).sequence == 3


@pytest.mark.parametrize("kind", KINDS)
async def test_cancel_by_key_and_by_prefix(kind: str, tmp_path: Path) -> None:
    config = config_for(kind, tmp_path)
    async with running(config) as stub:
        await stub.TryCompleteElseWatch(watch("order-1", ["cart:1", "user:9"]))
        await stub.TryCompleteElseWatch(watch("order-2", ["cart:2"]))
        await stub.TryCompleteElseWatch(watch("remind-1", ["cart:1"]))
        await stub.TryCompleteElseWatch(watch("remind-2", ["cart:3"]))
        by_key = await stub.Cancel(pb.CancelRequest(purgatory=NAME, key="cart:1"))
        assert sorted(s.operation_id for s in by_key.cancelled) == ["order-1", "remind-1"]
        assert all(s.state == CANCELLED for s in by_key.cancelled)
        by_prefix = await stub.Cancel(
            pb.CancelRequest(purgatory=NAME, operation_id_prefix="order-")
        )
        assert [s.operation_id for s in by_prefix.cancelled] == ["order-2"]
        info = await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))
        # order-1 watched user:9 too: it left that watch list at once.
        assert (info.purgatory.pending, info.purgatory.watched_keys) == (1, 1)
    if kind == "durable":
        async with running(config) as stub:
            assert (await _state(stub, "order-1")).state == CANCELLED
            assert (await _state(stub, "remind-2")).state == WATCHING


async def test_cancel_refuses_invalid_targets(tmp_path: Path) -> None:
    async with running(config_for("memory", tmp_path)) as stub:
        cases = [
            (pb.CancelRequest(purgatory=NAME), "target"),
            (pb.CancelRequest(purgatory=NAME, operation_id_prefix=""), "operation_id_prefix"),
            (_ids(), "operation_ids.ids"),
            (_ids("a", ""), "operation_ids.ids[1]"),
            (pb.CancelRequest(purgatory=NAME, key=""), "key"),
        ]
        for request, field in cases:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Cancel(request)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
            assert field in (info.value.details() or ""), info.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Cancel(pb.CancelRequest(purgatory="nope", key="k"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
