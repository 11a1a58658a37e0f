"""The observability benchmark's in-process part: the server's own Python path per pair.

Throughput over sockets on a shared machine swings by tens of percent from round to
round, far more than the few percent being measured. This part removes the transport
and the noise it brings: it calls the real servicer (its methods wrapped as the server's
edge wraps them) directly on one event loop, with pre-built requests and a stand-in for
the gRPC context, and measures the process's CPU time (not wall time: time spent
descheduled by other work does not count) for N pairs. Each mode is timed many times in
short repeats, interleaved, and the *minimum* per mode is kept: other work on the
machine can only make a repeat slower (caches, frequency), so the minimum is the closest
to the code's own cost.

A pair is the service benchmark's: a long-poll (``wait=true``) registered, then
answered by a signal on its key; unbatched, or in batches of B.
"""

from __future__ import annotations

import asyncio
import time
import types
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.api.rpc_telemetry import wrap_method
from purgatory_server._service.api.servicer import PurgatoryServicer
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.observability.readers import InMemoryReader
from purgatory_server._service.observability.setup import Telemetry, instrument

SERVICE = pb.DESCRIPTOR.services_by_name["PurgatoryService"]
MODES = ("off", "metrics", "metrics + tracing")


class _Context:
    """What the servicer and the wrappers use of grpc.aio's ServicerContext."""

    def code(self) -> None:
        return None

    def invocation_metadata(self) -> tuple[()]:
        return ()


def _servicer(mode: str, loop: asyncio.AbstractEventLoop) -> tuple[Any, Telemetry | None]:
    metrics, tracing = mode != "off", mode == "metrics + tracing"
    registry = PurgatoryRegistry(
        Limits(), PurgatorySettings(), loop, reaper_enabled=False, metrics=metrics, traced=tracing
    )
    registry.create(registry.settings_for("default", None))
    servicer: Any = PurgatoryServicer(registry, loop)
    if not metrics:
        return servicer, None
    telemetry = Telemetry(metric_readers=[InMemoryReader()], tracing=tracing)
    instrument(telemetry, registry)
    # Each method wrapped as the server's edge wraps its handlers (the edge's own checks,
    # the same in every mode, are left out).
    wrapped = types.SimpleNamespace()
    for method in SERVICE.methods:
        full = f"{SERVICE.full_name}/{method.name}"
        behavior = getattr(servicer, method.name)
        handler = wrap_method(
            full, method.server_streaming, behavior, telemetry.rpc, telemetry.tracer
        )
        setattr(wrapped, method.name, handler)
    return wrapped, telemetry


async def _pairs(servicer: Any, pairs: int, batch: int, tag: str) -> float:
    """CPU seconds for ``pairs`` pairs (requests built beforehand, not timed)."""
    ctx = _Context()
    rounds = []
    for r in range(pairs // batch):
        keys = [f"{tag}-{r}-{i}" for i in range(batch)]
        if batch == 1:
            watch = pb.TryCompleteElseWatchRequest(
                purgatory="default", keys=keys, timeout_ms=600_000, wait=True
            )
            signal = pb.CheckAndCompleteRequest(purgatory="default", key=keys[0])
            rounds.append((servicer.TryCompleteElseWatch, watch, servicer.CheckAndComplete, signal))
        else:
            ops = [pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys]
            watch = pb.BatchTryCompleteElseWatchRequest(
                purgatory="default", operations=ops, wait=True
            )
            signal = pb.BatchCheckAndCompleteRequest(
                purgatory="default", signals=[pb.KeySignal(key=k) for k in keys]
            )
            rounds.append(
                (servicer.BatchTryCompleteElseWatch, watch, servicer.BatchCheckAndComplete, signal)
            )
    started = time.process_time()
    for register, watch, complete, signal in rounds:
        waiting = asyncio.ensure_future(register(watch, ctx))
        await asyncio.sleep(0)  # the long-poll registers and parks
        await complete(signal, ctx)
        await waiting
    return time.process_time() - started


async def _measure(pairs: int, batch: int, repeats: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    built = {mode: _servicer(mode, loop) for mode in MODES}
    best = dict.fromkeys(MODES, float("inf"))
    for r in range(repeats):
        for mode in MODES:
            servicer, _ = built[mode]
            seconds = await _pairs(servicer, pairs, batch, f"{mode}-{r}")
            best[mode] = min(best[mode], seconds / pairs)
    for _, telemetry in built.values():
        if telemetry is not None:
            telemetry.shutdown()
    return best


def inprocess(pairs: int, batch: int, repeats: int) -> dict[str, float]:
    """Mode -> best seconds per pair, for batches of ``batch`` (1 = unbatched)."""
    return asyncio.run(_measure(pairs, batch, repeats))
