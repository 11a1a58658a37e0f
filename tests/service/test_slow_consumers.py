"""Issue 22, abuse patterns 1 and 6: Subscribe streams that do not read.

Pattern 1: non-reading streams while big outcomes are produced are cut with
RESOURCE_EXHAUSTED and an exact resume point, their buffers freed at once (the server's RSS
stays bounded) and they stop counting as subscribers. Pattern 6: while many streams do not
read, a well-behaved client keeps being served: its calls succeed, its own subscription
sees every outcome, and it can subscribe anew (the cut streams gave their slots back).
Real servers on loopback: a server process for RSS, in-process for the rest.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import grpc
from purgatory_client import AsyncPurgatoryClient, OperationSpec, OperationState
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from harness import ServerProcess
from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG, until_subscribers

PAYLOAD = 48 * 1024
ROUND = 75  # operations per batch request (75 x 48 KiB: under 4 MB)


async def _produce(client: AsyncPurgatoryClient, rounds: int, payload: int = PAYLOAD) -> None:
    """``rounds`` x ROUND outcomes carrying ``payload`` bytes each (one signal a round)."""
    for r in range(rounds):
        key = f"bulk-{r}"
        specs = [
            OperationSpec((key,), 60_000, payload=bytes(payload), operation_id=f"b{r}-{i}")
            for i in range(ROUND)
        ]
        await client.batch_try_complete_else_watch(specs)
        await client.check_and_complete(key)


async def _drain(call: grpc.aio.UnaryStreamCall) -> tuple[list[int], grpc.aio.AioRpcError]:
    """Read a stream to its end: the sequences it got and the error it ended with."""
    got: list[int] = []
    try:
        async for event in call:
            if not event.heartbeat:
                got.append(event.sequence)
    except grpc.aio.AioRpcError as exc:
        return got, exc
    raise AssertionError("the stream ended without an error")


def test_non_reading_streams_are_cut_freed_and_uncounted(tmp_path: Path) -> None:
    # Nothing but a subscriber buffer may hold an outcome for long: the window retains
    # 100 and finished ids are not remembered.
    config = """
[limits]
subscriber_buffer_bytes = 1048576
[defaults]
max_pending = 100000
retained_events = 100
dedup_window_ms = 0
"""
    with ServerProcess(tmp_path, config=config) as server:
        asyncio.run(_pattern_1(server))


async def _trickle(client: AsyncPurgatoryClient, rounds: int) -> None:
    """``rounds`` x 3 outcomes of 48 KiB, a few at a time: each stream's handler gets
    to write between rounds, as under a steady load."""
    for r in range(rounds):
        key = f"t-{r}"
        spec = OperationSpec((key,), 60_000, payload=bytes(PAYLOAD))
        await client.batch_try_complete_else_watch([spec] * 3)
        await client.check_and_complete(key)


async def _pattern_1(server: ServerProcess) -> None:
    async with (
        grpc.aio.insecure_channel(server.address) as channel,
        AsyncPurgatoryClient(server.address, timeout=30) as client,
    ):
        stub = pb_grpc.PurgatoryServiceStub(channel)
        await _trickle(client, 10)  # warm up, then measure
        baseline = server.rss_bytes()
        slow = [stub.Subscribe(pb.SubscribeRequest(purgatory="default")) for _ in range(4)]
        for call in slow:
            await call.initial_metadata()
        await until_subscribers(client, 4)
        await _trickle(client, 400)  # 1,200 x 48 KiB = 56 MiB of outcomes
        grown = server.rss_bytes() - baseline
        info = await client.get_purgatory("default")
        assert info.subscribers == 0, "cut streams must stop counting as subscribers"
        # Four buffers of 1 MiB, a flow-control window each, allocator slack: far below
        # the 56 MiB that buffers of 10,000 events hold.
        assert grown < 24 << 20, f"RSS grew {grown >> 20} MiB"
        for call in slow:
            got, error = await asyncio.wait_for(_drain(call), 30)
            assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            resume = dict(error.trailing_metadata() or ())["purgatory-resume-after"]
            # Exactly what was handed to the transport before the cut, then the status.
            assert got == list(range(31, int(resume) + 1))


async def test_a_well_behaved_client_is_served_among_non_readers(serve: ServeFn) -> None:
    limits = replace(
        TEST_CONFIG.limits,
        max_subscribers=21,
        subscriber_buffer=10_000,
        subscriber_buffer_bytes=4 << 20,  # a reader keeps up with a round (2.5 MiB)
        max_payload_bytes=PAYLOAD,
    )
    config = replace(TEST_CONFIG, limits=limits)
    purgatory = replace(config.purgatories[0], max_pending=1000, retained_events=1000)
    config = replace(config, purgatories=(purgatory,))
    _, port = await serve(config)
    target = f"127.0.0.1:{port}"
    async with (
        grpc.aio.insecure_channel(target) as channel,
        AsyncPurgatoryClient(target, timeout=30) as client,
    ):
        stub = pb_grpc.PurgatoryServiceStub(channel)
        slow = [stub.Subscribe(pb.SubscribeRequest(purgatory="default")) for _ in range(20)]
        for call in slow:
            await call.initial_metadata()
        reader = client.subscribe()
        rounds = 6
        seen: list[int] = []

        async def read_all() -> None:
            async for event in reader:
                seen.append(event.sequence)
                if len(seen) == rounds * ROUND + 10:
                    return

        reading = asyncio.create_task(read_all())
        await until_subscribers(client, 21)  # every slot taken
        producing = asyncio.create_task(_produce(client, rounds))
        for i in range(10):  # the probe's pairs, meanwhile: each one completes
            key = f"probe-{i}"
            op = asyncio.create_task(client.wait([key], 30_000, operation_id=key))
            while not op.done():  # signal until the watch is there and completes
                await client.check_and_complete(key)
                await asyncio.sleep(0.005)
            assert (await op).state is OperationState.COMPLETED
        await asyncio.wait_for(producing, 60)
        await asyncio.wait_for(reading, 60)
        assert seen == list(range(1, rounds * ROUND + 11))
        # The non-readers were cut and gave their slots back: one can subscribe anew.
        await until_subscribers(client, 1)
        fresh = stub.Subscribe(pb.SubscribeRequest(purgatory="default"))
        await fresh.initial_metadata()
        await until_subscribers(client, 2)
        fresh.cancel()
        for call in slow:
            call.cancel()
