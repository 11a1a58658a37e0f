"""The load process of ``bench.workers_bench``: stream-form pairs from a process of its own.

Why a process: the server under test runs one or several worker processes; a load
generator sharing a process (and a GIL) with anything else would measure itself. Each
load process runs ``streams`` Session streams, stream ``j`` on purgatory
``names[j % len(names)]``, with B watches then B signals in flight per frame pair (the
stream form of ``bench._service_stream``). Before its stream opens, each stream finds
its purgatory's owner the way the clients do: one GetPurgatory on a connection of its
own to the server's one address; UNAVAILABLE naming ``purgatory-owner`` sends it to that
worker's own address, an answer keeps the connection (a connection stays on the worker
the kernel gave it). All load processes start at the same wall-clock instant, warm up,
then count pairs over the same window. Redis's batch form runs from as many load
processes, the same way (``run_redis_load``), so neither side's client is the limit alone.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import OWN_CONNECTION
from bench._service_redis import redis_batched

__all__ = ["run_load", "run_redis_load"]


async def _owner_stub(target: str, name: str) -> tuple[grpc.aio.Channel, Any]:
    """A channel and stub on the worker that owns ``name`` (see module docstring)."""
    channel = grpc.aio.insecure_channel(target, OWN_CONNECTION)
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    try:
        await stub.GetPurgatory(pb.GetPurgatoryRequest(name=name), timeout=10)
        return channel, stub
    except grpc.aio.AioRpcError as exc:
        owner = dict(exc.trailing_metadata() or ()).get("purgatory-owner")
        if exc.code() != grpc.StatusCode.UNAVAILABLE or not isinstance(owner, str):
            raise
    await channel.close()
    channel = grpc.aio.insecure_channel(owner, OWN_CONNECTION)
    return channel, pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]


async def _load(
    target: str, names: list[str], *, streams: int, size: int, tag: str, times: tuple[float, ...]
) -> dict[str, Any]:
    start_at, warmup, duration = times
    owners = [await _owner_stub(target, names[j % len(names)]) for j in range(streams)]
    calls = [stub.Session() for _, stub in owners]
    counted = [0]
    latencies: list[float] = []
    await asyncio.sleep(max(0.0, start_at - time.time()))
    measure_from, end = start_at + warmup, start_at + warmup + duration

    async def stream(j: int) -> None:
        call, name, serial = calls[j], names[j % len(names)], 0
        while time.time() < end:
            serial += 1
            keys = [f"{tag}-{j}-{serial}-{i}" for i in range(size)]
            specs = [pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys]
            await call.write(
                pb.SessionRequest(request_id=2 * serial - 1, purgatory=name, watches=specs)
            )
            signals = [pb.KeySignal(key=k) for k in keys]
            await call.write(
                pb.SessionRequest(request_id=2 * serial, purgatory=name, signals=signals)
            )
            t0, outcomes, acked = time.time(), 0, False
            while outcomes < size or not acked:
                message = await call.read()
                if message is grpc.aio.EOF:
                    raise RuntimeError("session ended early")
                if message.HasField("ack"):
                    if message.ack.code:
                        raise RuntimeError(f"frame refused: {message.ack.message}")
                    acked = acked or message.ack.request_id == 2 * serial
                outcomes += len(message.outcomes)
            if measure_from <= t0 and time.time() <= end:
                counted[0] += size
                latencies.append(time.time() - t0)

    try:
        await asyncio.gather(*(stream(j) for j in range(streams)))
    finally:
        for call in calls:
            call.cancel()
        for channel, _ in owners:
            await channel.close()
    return {"pairs": counted[0], "seconds": duration, "latencies": latencies}


def run_load(
    target: str, names: list[str], *, streams: int, size: int, tag: str, times: tuple[float, ...]
) -> dict[str, Any]:
    """One load process's count (a ProcessPoolExecutor task; ``times`` is the shared
    wall-clock start, the warm-up and the measured duration)."""
    return asyncio.run(_load(target, names, streams=streams, size=size, tag=tag, times=times))


async def _redis_load(port: int, tag: str, times: tuple[float, ...], a: Any) -> dict[str, Any]:
    start_at, a.warmup, a.duration = times
    await asyncio.sleep(max(0.0, start_at - time.time()))
    run = await redis_batched("redis", port, a, prefix=tag)
    return {"pairs": run.pairs, "seconds": run.seconds, "latencies": run.latencies}


def run_redis_load(port: int, tag: str, times: tuple[float, ...], a: Any) -> dict[str, Any]:
    """Redis's batch form (``bench._service_redis.redis_batched``) from this process, from
    the shared start: the same number of load processes as the purgatory gets."""
    return asyncio.run(_redis_load(port, tag, times, a))
