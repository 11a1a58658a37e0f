"""AckStream and batched deliveries over the wire (docs/service.md "Batch
acknowledgements"): requests answered in order, a request's failure in its own response
while the stream goes on, deliveries ready together in one message of at most
``max_batch``, the fields' INVALID_ARGUMENT, and both Python clients reading batches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from purgatory_client import AsyncPurgatoryClient, PurgatoryClient
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from tests.service.helpers import ServerThread, config_with

OK, INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION = 0, 3, 5, 9
P = "default"


@pytest.fixture
async def stub(serve: Any) -> AsyncIterator[pb_grpc.PurgatoryServiceStub]:
    _, port = await serve()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield pb_grpc.PurgatoryServiceStub(channel)


async def _join(
    stub: pb_grpc.PurgatoryServiceStub, group: str, prefetch: int, max_batch: int
) -> Any:
    call = stub.Subscribe(
        pb.SubscribeRequest(purgatory=P, group=group, prefetch=prefetch, max_batch=max_batch)
    )
    await call.initial_metadata()  # joined: what is published now reaches the group
    return call


async def _publish_together(stub: pb_grpc.PurgatoryServiceStub, prefix: str, n: int) -> None:
    """``n`` outcomes published by one call (Cancel by prefix ends them in one go)."""
    specs = [pb.OperationSpec(operation_id=f"{prefix}{i}", timeout_ms=60_000) for i in range(n)]
    await stub.BatchTryCompleteElseWatch(
        pb.BatchTryCompleteElseWatchRequest(purgatory=P, operations=specs)
    )
    await stub.Cancel(pb.CancelRequest(purgatory=P, operation_id_prefix=prefix))


async def _read(call: Any) -> pb.OperationEvent:
    message: pb.OperationEvent = await asyncio.wait_for(call.read(), 10)
    assert message != grpc.aio.EOF
    return message


async def test_deliveries_ready_together_come_in_messages_of_at_most_max_batch(
    stub: pb_grpc.PurgatoryServiceStub,
) -> None:
    call = await _join(stub, "batched", prefetch=8, max_batch=3)
    await _publish_together(stub, "b-", 8)
    sizes, sequences = [], []
    while sum(sizes) < 8:
        message = await _read(call)
        assert (message.sequence, message.operation_id) == (0, "")  # an envelope only
        sizes.append(len(message.batch))
        sequences += [e.sequence for e in message.batch]
        assert all(e.group == "batched" and e.delivery_attempt == 1 for e in message.batch)
    assert sizes == [3, 3, 2]
    assert sequences == sorted(sequences) and len(set(sequences)) == 8
    # Without max_batch a member gets one delivery per message, as before.
    single = await _join(stub, "single", prefetch=4, max_batch=0)
    await _publish_together(stub, "s-", 2)
    for _ in range(2):
        message = await _read(single)
        assert not message.batch and message.operation_id.startswith("s-")
    call.cancel()
    single.cancel()


async def test_ack_stream_answers_in_order_and_a_failed_request_alone(
    stub: pb_grpc.PurgatoryServiceStub,
) -> None:
    call = await _join(stub, "acks", prefetch=8, max_batch=8)
    await _publish_together(stub, "a-", 4)
    got: list[pb.OperationEvent] = []
    while len(got) < 4:
        got += (await _read(call)).batch
    first, second, third, fourth = got

    def entry(e: pb.OperationEvent, attempt: int | None = None) -> pb.AckBatchEntry:
        return pb.AckBatchEntry(sequence=e.sequence, attempt=attempt or e.delivery_attempt)

    requests = [
        pb.AckStreamRequest(
            purgatory=P, group="acks", entries=[entry(first), entry(second, attempt=7)]
        ),
        pb.AckStreamRequest(purgatory=P, group="nobody", entries=[entry(third)]),
        pb.AckStreamRequest(purgatory=P, group="acks", entries=[]),
        pb.AckStreamRequest(purgatory="missing", group="acks", entries=[entry(third)]),
        pb.AckStreamRequest(
            purgatory=P, group="acks", entries=[entry(third), entry(fourth), entry(first)]
        ),
    ]
    acks = stub.AckStream()
    for request in requests:  # all written before any answer is read
        await acks.write(request)
    answers = [await asyncio.wait_for(acks.read(), 10) for _ in requests]
    await acks.done_writing()
    assert await acks.read() == grpc.aio.EOF
    assert await acks.code() == grpc.StatusCode.OK
    assert [[r.code for r in a.results] for a in answers] == [
        [OK, FAILED_PRECONDITION],  # the second entry's attempt is stale
        [],
        [],
        [],
        [OK, OK, NOT_FOUND],  # the first was acked by the first request
    ]
    assert [a.code for a in answers] == [OK, NOT_FOUND, INVALID_ARGUMENT, NOT_FOUND, OK]
    assert "nobody" in answers[1].message and "entries" in answers[2].message
    assert "missing" in answers[3].message
    # The second delivery is still leased: only its own lease was refused.
    (group,) = (await stub.ListGroups(pb.ListGroupsRequest(purgatory=P))).groups
    assert (group.leased, group.ready) == (1, 0)
    call.cancel()


async def test_max_batch_is_checked(stub: pb_grpc.PurgatoryServiceStub) -> None:
    for request, problem in [
        (pb.SubscribeRequest(purgatory=P, max_batch=4), "needs group"),
        (pb.SubscribeRequest(purgatory=P, group="g", max_batch=10_001), "outside"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _read(stub.Subscribe(request))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (raised.value.details() or "").startswith("max_batch: ")
        assert problem in (raised.value.details() or "")


async def test_an_open_ack_stream_takes_a_stream_slot(serve: Any) -> None:
    _, port = await serve(config_with(max_subscribe_streams_per_connection=1))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)
        acks = stub.AckStream()
        await acks.write(
            pb.AckStreamRequest(purgatory=P, group="nobody", entries=[pb.AckBatchEntry(sequence=1)])
        )
        assert (await acks.read()).code == NOT_FOUND  # open and answering
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _read(stub.Subscribe(pb.SubscribeRequest(purgatory=P, group="g")))
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        await acks.done_writing()
        assert await acks.code() == grpc.StatusCode.OK
        await _join(stub, "g", prefetch=1, max_batch=0)  # the slot is free again


async def test_both_clients_hand_out_each_delivery_of_a_batch_in_order() -> None:
    with ServerThread() as server, PurgatoryClient(server.target, timeout=10) as client:
        stream = client.join_group("sync", prefetch=6)
        for i in range(5):
            client.try_complete_else_watch([], 60_000, operation_id=f"y-{i}", wait=False)
        client.cancel(prefix="y-")
        got = [next(stream) for _ in range(5)]
        assert [d.operation_id for d in got] == [f"y-{i}" for i in range(5)]
        assert [r.ok for r in client.ack_batch("sync", [d.sequence for d in got])] == [True] * 5
        stream.close()
        async with AsyncPurgatoryClient(server.target, timeout=10) as aclient:
            astream = await aclient.join_group("async", prefetch=6)
            for i in range(5):
                await aclient.try_complete_else_watch([], 60_000, operation_id=f"z-{i}", wait=False)
            await aclient.cancel(prefix="z-")
            agot = [await asyncio.wait_for(anext(astream), 10) for _ in range(5)]
            assert [d.operation_id for d in agot] == [f"z-{i}" for i in range(5)]
            await astream.aclose()


async def test_a_request_that_does_not_decode_ends_the_stream_invalid_argument(
    serve: Any,
) -> None:
    _, port = await serve()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        raw = channel.stream_stream("/purgatory.v1.PurgatoryService/AckStream")()
        good = pb.AckStreamRequest(purgatory=P, group="g", entries=[pb.AckBatchEntry(sequence=1)])
        await raw.write(good.SerializeToString())
        answer = pb.AckStreamResponse.FromString(await asyncio.wait_for(raw.read(), 10))
        assert answer.code == NOT_FOUND
        await raw.write(b"\xff\xff\xff")  # not a message
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await asyncio.wait_for(raw.read(), 10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (raised.value.details() or "").startswith("request: cannot be decoded")
