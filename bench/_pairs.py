"""Closed-loop register -> signal pairs over raw stubs: the durable and scale-out benchmarks'
load (no long-poll; what is measured is registering and completing, journal included).

``clients`` workers each loop: register an operation on a fresh key
(``TryCompleteElseWatch``, no wait) then signal that key (``CheckAndComplete``), which
completes it; or, with ``batch`` > 1, ``BatchTryCompleteElseWatch`` of ``batch`` fresh keys
then ``BatchCheckAndComplete`` of them. A pair is one acknowledged registration plus the
acknowledged signal that completed it. After ``warmup`` seconds of the same loop, pairs are
counted for ``seconds``; the rate is pairs per second of that window.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

__all__ = ["pairs_per_second"]


async def pairs_per_second(
    address: str,
    purgatory: str,
    clients: int,
    seconds: float,
    *,
    batch: int = 1,
    warmup: float = 0.5,
) -> float:
    channel = grpc.aio.insecure_channel(address)
    stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    done = 0
    stop_at = 0.0

    async def one(key: str) -> int:
        await stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(purgatory=purgatory, keys=[key], timeout_ms=60_000)
        )
        response = await stub.CheckAndComplete(
            pb.CheckAndCompleteRequest(purgatory=purgatory, key=key)
        )
        assert response.completed == 1
        return 1

    async def many(keys: list[str]) -> int:
        await stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(
                purgatory=purgatory,
                operations=[pb.OperationSpec(keys=[k], timeout_ms=60_000) for k in keys],
            )
        )
        answer = await stub.BatchCheckAndComplete(
            pb.BatchCheckAndCompleteRequest(
                purgatory=purgatory, signals=[pb.KeySignal(key=k) for k in keys]
            )
        )
        assert answer.completed == len(keys)
        return len(keys)

    async def worker(w: int) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < stop_at:
            n += 1
            if batch > 1:
                done += await many([f"w{w}-{n}-{j}" for j in range(batch)])
            else:
                done += await one(f"w{w}-{n}")

    try:
        stop_at = time.perf_counter() + warmup
        await asyncio.gather(*(worker(w) for w in range(clients)))
        done = 0
        started = time.perf_counter()
        stop_at = started + seconds
        # Other worker numbers: keys never used in the warm-up.
        await asyncio.gather(*(worker(w + clients) for w in range(clients)))
        return done / (time.perf_counter() - started)
    finally:
        await channel.close()
