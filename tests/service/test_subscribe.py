"""Subscriptions: sequences, replay after a sequence, filters, the retained window,
slow subscribers, and the clients' automatic resume (no loss, no duplicates)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    OperationSpec,
    OperationState,
    OutOfRangeError,
    PurgatoryClient,
    ResumePolicy,
    SlowSubscriberError,
)
from purgatory_client.errors import from_rpc_error
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from tests.service.helpers import ServerThread, until_subscribers


async def _complete(client: AsyncPurgatoryClient, n: int, prefix: str = "op") -> None:
    """Register n operations on distinct keys and complete them in one batch signal."""
    specs = [
        OperationSpec((f"{prefix}-{i}",), 60_000, operation_id=f"{prefix}-{i}") for i in range(n)
    ]
    await client.batch_try_complete_else_watch(specs)
    await client.batch_check_and_complete([f"{prefix}-{i}" for i in range(n)])


async def _take(stream, n: int):  # type: ignore[no-untyped-def]
    out = []
    async for event in stream:
        out.append(event)
        if len(out) == n:
            break
    return out


async def test_live_events_in_strictly_increasing_sequence(client: AsyncPurgatoryClient) -> None:
    await _complete(client, 3, "before")  # not seen: the stream starts from now on
    stream = client.subscribe()
    reader = asyncio.create_task(_take(stream, 5))
    await until_subscribers(client, 1)
    await _complete(client, 5, "live")
    events = await asyncio.wait_for(reader, 5)
    assert [e.sequence for e in events] == [4, 5, 6, 7, 8]
    assert [e.operation_id for e in events] == [f"live-{i}" for i in range(5)]
    assert all(e.state is OperationState.COMPLETED and e.purgatory == "default" for e in events)
    assert events[0].keys == ("live-0",)


async def test_after_sequence_replays_then_goes_live(client: AsyncPurgatoryClient) -> None:
    await _complete(client, 6)
    reader = asyncio.create_task(_take(client.subscribe(after_sequence=2), 6))
    await until_subscribers(client, 1)
    await _complete(client, 2, "new")
    events = await asyncio.wait_for(reader, 5)
    assert [e.sequence for e in events] == [3, 4, 5, 6, 7, 8]


async def test_filter_by_state_key_and_prefix(client: AsyncPurgatoryClient) -> None:
    await _complete(client, 3, "a")
    await client.try_complete_else_watch([], 60_000, operation_id="b-forced")
    await client.force_complete("b-forced")
    await _complete(client, 2, "b")
    forced = await _take(
        client.subscribe(after_sequence=0, states=[OperationState.FORCE_COMPLETED]), 1
    )
    assert [e.operation_id for e in forced] == ["b-forced"]
    by_key = await _take(client.subscribe(after_sequence=0, keys=["a-1", "b-0"]), 2)
    assert [e.operation_id for e in by_key] == ["a-1", "b-0"]
    by_prefix = await _take(client.subscribe(after_sequence=0, operation_id_prefix="b-"), 3)
    assert [e.operation_id for e in by_prefix] == ["b-forced", "b-0", "b-1"]


async def test_after_sequence_older_than_retained_is_out_of_range(
    client: AsyncPurgatoryClient,
) -> None:
    for part in range(3):  # TEST_CONFIG retains 50 (sequences 11..60), max_pending 50
        await _complete(client, 20, f"p{part}")
    with pytest.raises(OutOfRangeError) as info:
        await _take(client.subscribe(after_sequence=5), 1)
    assert info.value.oldest_sequence == 11
    assert "11" in info.value.details
    ok = await _take(client.subscribe(after_sequence=10), 1)
    assert ok[0].sequence == 11
    with pytest.raises(OutOfRangeError, match="beyond"):
        await _take(client.subscribe(after_sequence=61), 1)


async def test_slow_subscriber_is_cut_off_with_the_resume_sequence(server) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)
        slow = stub.Subscribe(pb.SubscribeRequest(purgatory="default"))
        assert dict(await slow.initial_metadata())["purgatory-start-after"] == "0"
        async with AsyncPurgatoryClient(f"127.0.0.1:{server.port}") as client:
            fast = asyncio.create_task(_take(client.subscribe(), 10))
            await until_subscribers(client, 2)  # the slow one and this one
            # One batch publishes 10 outcomes in one loop turn: the slow stream's buffer (4)
            # overflows, while completions and the other subscriber carry on.
            await _complete(client, 10)
            assert [e.sequence for e in await asyncio.wait_for(fast, 5)] == list(range(1, 11))
        received = []
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for msg in slow:
                received.append(msg.sequence)
        error = from_rpc_error(info.value)
        assert isinstance(error, SlowSubscriberError)
        # The buffer (1..4, not yet handed to the transport: all 10 outcomes came in one
        # loop turn) was dropped at the cut: the stream ends at what it had sent.
        assert received == []
        assert error.resume_after == 0
        assert "after_sequence=0" in error.details


async def test_async_subscribe_resumes_after_being_cut_off(client: AsyncPurgatoryClient) -> None:
    reader = asyncio.create_task(_take(client.subscribe(after_sequence=0), 30))
    await until_subscribers(client, 1)
    await _complete(client, 30)  # one loop turn: overflows the 4-event buffer at once
    events = await asyncio.wait_for(reader, 10)
    assert [e.sequence for e in events] == list(range(1, 31))


async def test_without_resume_the_cut_off_surfaces(serve) -> None:  # type: ignore[no-untyped-def]
    _, port = await serve()
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", resume=ResumePolicy(attempts=0)) as client:
        reader = asyncio.create_task(_take(client.subscribe(after_sequence=0), 30))
        await until_subscribers(client, 1)
        await _complete(client, 30)
        with pytest.raises(SlowSubscriberError):
            await asyncio.wait_for(reader, 10)


async def test_async_subscribe_resumes_from_now_on_without_loss(
    client: AsyncPurgatoryClient,
) -> None:
    await _complete(client, 3, "old")
    stream = client.subscribe()
    reader = asyncio.create_task(_take(stream, 20))
    await until_subscribers(client, 1)
    await _complete(client, 20)
    events = await asyncio.wait_for(reader, 10)
    assert [e.sequence for e in events] == list(range(4, 24))


def test_sync_subscribe_resumes_after_being_cut_off() -> None:
    with (
        ServerThread() as st,
        PurgatoryClient(st.target, resume=ResumePolicy(attempts=20)) as client,
    ):
        specs = [OperationSpec((f"k{i}",), 60_000) for i in range(25)]
        client.batch_try_complete_else_watch(specs)
        client.check_and_complete("k0")
        stream = client.subscribe(after_sequence=0)
        got = [next(stream).sequence]  # the stream is now live
        # 24 outcomes in one loop turn overflow the 4-event buffer: the server cuts the
        # stream off and the client resumes after the last sequence it received.
        client.batch_check_and_complete([f"k{i}" for i in range(1, 25)])
        for event in stream:
            got.append(event.sequence)
            if len(got) == 25:
                break
        stream.close()
        assert got == list(range(1, 26))


def test_sync_subscribe_raises_when_resume_is_impossible() -> None:
    with (
        ServerThread() as st,
        PurgatoryClient(st.target) as client,
        pytest.raises(OutOfRangeError),
    ):
        next(iter(client.subscribe(after_sequence=99)))
