"""Issue 22's abuse patterns, the load side of ``bench.abuse_bench`` (see its docstring).

Each pattern is a coroutine ``(load, stop)`` that abuses the server until the monotonic
time ``stop`` (or until its work is done) and counts what it saw in ``load.seen``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import OWN_CONNECTION
from harness import ServerProcess

__all__ = ["PATTERNS", "Load"]


class Load:
    """What the patterns share: the server, a stub on its own connection, options."""

    def __init__(self, server: ServerProcess, stub: Any, args: argparse.Namespace) -> None:
        self.server = server
        self.stub = stub
        self.args = args
        self.seen: dict[str, int] = {}

    def count(self, what: str, n: int = 1) -> None:
        self.seen[what] = self.seen.get(what, 0) + n


async def _produce(load: Load, purgatory: str, n: int, payload: int, stop: float) -> int:
    """``n`` outcomes of ``payload`` bytes, 50 a round (one signal a round)."""
    made = 0
    r = 0
    while made < n and time.monotonic() < stop:
        key = f"bulk-{purgatory}-{r}-{time.monotonic()}"
        r += 1
        spec = pb.OperationSpec(keys=[key], timeout_ms=60_000, payload=bytes(payload))
        await load.stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(purgatory=purgatory, operations=[spec] * 50)
        )
        await load.stub.CheckAndComplete(pb.CheckAndCompleteRequest(purgatory=purgatory, key=key))
        made += 50
    return made


async def _non_readers(load: Load, channel: grpc.aio.Channel, n: int) -> list[Any]:
    stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    calls = [stub.Subscribe(pb.SubscribeRequest(purgatory="default")) for _ in range(n)]
    for call in calls:
        try:
            await call.initial_metadata()
        except grpc.aio.AioRpcError as exc:
            load.count(f"subscribe refused {exc.code().name}")
    return calls


async def _end_streams(load: Load, calls: list[Any]) -> None:
    """Read what each non-reader had (bounded), noting how it ended; then cancel it."""
    for call in calls:
        try:
            async with asyncio.timeout(2):
                async for _ in call:
                    pass
        except grpc.aio.AioRpcError as exc:
            load.count(f"stream ended {exc.code().name}")
        except TimeoutError:
            load.count("stream still open")
        call.cancel()


async def slow_subscribe(load: Load, stop: float) -> None:
    async with grpc.aio.insecure_channel(load.server.address, options=OWN_CONNECTION) as ch:
        calls = await _non_readers(load, ch, load.args.streams)
        load.count("outcomes", await _produce(load, "default", 10**9, load.args.payload, stop))
        await _end_streams(load, calls)


async def many_subscribers(load: Load, stop: float) -> None:
    async with grpc.aio.insecure_channel(load.server.address, options=OWN_CONNECTION) as ch:
        calls = await _non_readers(load, ch, load.args.subscribers)
        load.count("outcomes", await _produce(load, "default", 10**9, 32 * 1024, stop))
        await _end_streams(load, calls)


async def slow_session(load: Load, stop: float) -> None:
    """``--sessions`` non-reading Sessions side by side, each on its own connection."""
    await asyncio.gather(*(_one_slow_session(load, stop) for _ in range(load.args.sessions)))


async def _one_slow_session(load: Load, stop: float) -> None:
    async with grpc.aio.insecure_channel(load.server.address, options=OWN_CONNECTION) as ch:
        stub: Any = pb_grpc.PurgatoryServiceStub(ch)  # type: ignore[no-untyped-call]
        queue: asyncio.Queue[pb.SessionRequest | None] = asyncio.Queue(maxsize=4)

        async def frames() -> Any:
            while (frame := await queue.get()) is not None:
                yield frame

        call = stub.Session(frames())
        spec = pb.OperationSpec(timeout_ms=1, payload=bytes(load.args.payload))
        n = 0
        try:
            while time.monotonic() < stop and not call.done():
                n += 1
                frame = pb.SessionRequest(request_id=n, purgatory="default", watches=[spec] * 50)
                await asyncio.wait_for(queue.put(frame), max(0.01, stop - time.monotonic()))
                load.count("frames")
        except TimeoutError:
            load.count("frames blocked (backpressure)")
        if call.done():
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
                await call
            load.count(f"session ended {call.code().name}")
        call.cancel()


async def signal_data(load: Load, stop: float) -> None:
    """``--signal-ops`` operations waiting for 5 signals on one key, sent 4 signals of
    64 KiB data each."""
    key = f"shared-{time.monotonic()}"
    five = pb.Condition(min_signals=pb.MinSignalsCondition(count=5))
    spec = pb.OperationSpec(keys=[key], timeout_ms=60_000, condition=five)
    for first in range(0, load.args.signal_ops, 1000):
        n = min(1000, load.args.signal_ops - first)
        await load.stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(purgatory="default", operations=[spec] * n)
        )
    signal = pb.Signal(data=bytes(64 * 1024))
    for _ in range(4):
        await load.stub.CheckAndComplete(
            pb.CheckAndCompleteRequest(purgatory="default", key=key, signal=signal)
        )
        load.count("signals")
    await asyncio.sleep(max(0.0, stop - time.monotonic()))
    # The fifth signal ends them (their data is freed before the next pattern).
    await load.stub.CheckAndComplete(pb.CheckAndCompleteRequest(purgatory="default", key=key))


async def keys(load: Load, stop: float) -> None:
    made = 0
    while time.monotonic() < stop and made < load.args.key_ops:
        specs = [
            pb.OperationSpec(
                keys=[f"{made + i:08d}-{j:04d}-".ljust(256, "k") for j in range(64)],
                timeout_ms=5_000,
            )
            for i in range(50)
        ]
        await load.stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(purgatory="default", operations=specs)
        )
        made += 50
    load.count("operations x 64 keys", made)
    await asyncio.sleep(max(0.0, stop - time.monotonic()))


async def retained(load: Load, stop: float) -> None:
    names: list[str] = []
    keep = pb.PurgatoryConfig(retained_events=1000)
    for i in range(load.args.purgatories):
        try:
            request = pb.CreatePurgatoryRequest(name=f"retain-{i}", config=keep)
            await load.stub.CreatePurgatory(request)
        except grpc.aio.AioRpcError as exc:
            load.count(f"create refused {exc.code().name}")
            break
        names.append(f"retain-{i}")
    for name in names:
        load.count("outcomes", await _produce(load, name, 1000, 32 * 1024, stop))
    await asyncio.sleep(max(0.0, stop - time.monotonic()))
    for name in names:
        await load.stub.DeletePurgatory(pb.DeletePurgatoryRequest(name=name))


async def idle_connections(load: Load, stop: float) -> None:
    sockets: list[socket.socket] = []
    try:
        for _ in range(load.args.connections):
            try:
                sockets.append(socket.create_connection(("127.0.0.1", load.server.port), 2))
            except OSError:
                load.count("connect failed")
        load.count("connections opened", len(sockets))
        await asyncio.sleep(max(0.0, stop - time.monotonic()))
    finally:
        for sock in sockets:
            sock.close()


async def bulk(load: Load, stop: float) -> None:
    """4 senders of back-to-back ``--bulk-batch``-operation batches (registered, then
    signalled): the loop's queue of bulk work. A shed batch (RESOURCE_EXHAUSTED) waits its
    RetryInfo delay, as the clients' retry does."""

    async def sender(n: int) -> None:
        r = 0
        while time.monotonic() < stop:
            keys = [f"bulk-{n}-{r}-{i}" for i in range(load.args.bulk_batch)]
            r += 1
            specs = [pb.OperationSpec(keys=[k], timeout_ms=60_000) for k in keys]
            signals = [pb.KeySignal(key=k) for k in keys]
            try:
                await load.stub.BatchTryCompleteElseWatch(
                    pb.BatchTryCompleteElseWatchRequest(purgatory="default", operations=specs)
                )
                await load.stub.BatchCheckAndComplete(
                    pb.BatchCheckAndCompleteRequest(purgatory="default", signals=signals)
                )
                load.count("operations", len(keys))
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                load.count("batches shed")
                await asyncio.sleep(0.1)

    await asyncio.gather(*(sender(n) for n in range(4)))


PATTERNS: dict[str, Callable[[Load, float], Awaitable[None]]] = {
    "1 slow-subscribe": slow_subscribe,
    "2 slow-session": slow_session,
    "3 signal-data": signal_data,
    "4 keys": keys,
    "5 retained": retained,
    "6 many-subscribers": many_subscribers,
    "7 idle-connections": idle_connections,
    "8 bulk": bulk,
}
