"""Closed-loop register -> signal pairs over raw stubs: the durable and scale-out benchmarks'
load (no long-poll; what is measured is registering and completing, journal included).

``clients`` workers each loop: register an operation on a fresh key
(``TryCompleteElseWatch``, no wait) then signal that key (``CheckAndComplete``), which
completes it; or, with ``batch`` > 1, ``BatchTryCompleteElseWatch`` of ``batch`` fresh keys
then ``BatchCheckAndComplete`` of them. A pair is one acknowledged registration plus the
acknowledged signal that completed it. After ``warmup`` seconds of the same loop, pairs are
counted for ``seconds``; the rate is pairs per second of that window.

A call refused with UNAVAILABLE is re-sent after a short pause (for up to
``UNAVAILABLE_S``): a replicated purgatory's lease renewed late on a loaded machine makes
its owner refuse calls ("a new owner is being chosen") until it renews. Nothing was done
by the refused call, so the re-send is safe; the pause counts in the window, so a lease
blip costs throughput instead of failing the measurement. Any other error fails it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

__all__ = ["UNAVAILABLE_S", "pairs_per_second", "resend_unavailable"]

UNAVAILABLE_S = 30.0
_PAUSE_S = 0.05


async def resend_unavailable(call: Any, request: Any, timeout: float | None = None) -> Any:
    """``await call(request)``, re-sent while it is refused UNAVAILABLE (see module doc)."""
    deadline = time.monotonic() + UNAVAILABLE_S
    while True:
        try:
            return await call(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
        await asyncio.sleep(_PAUSE_S)


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
        await resend_unavailable(
            stub.TryCompleteElseWatch,
            pb.TryCompleteElseWatchRequest(purgatory=purgatory, keys=[key], timeout_ms=60_000),
        )
        response = await resend_unavailable(
            stub.CheckAndComplete, pb.CheckAndCompleteRequest(purgatory=purgatory, key=key)
        )
        assert response.completed == 1
        return 1

    async def many(keys: list[str]) -> int:
        await resend_unavailable(
            stub.BatchTryCompleteElseWatch,
            pb.BatchTryCompleteElseWatchRequest(
                purgatory=purgatory,
                operations=[pb.OperationSpec(keys=[k], timeout_ms=60_000) for k in keys],
            ),
        )
        answer = await resend_unavailable(
            stub.BatchCheckAndComplete,
            pb.BatchCheckAndCompleteRequest(
                purgatory=purgatory, signals=[pb.KeySignal(key=k) for k in keys]
            ),
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
