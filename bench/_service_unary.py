"""The service benchmark's unary forms: watch -> signal -> outcome pairs over plain RPCs.

- **unbatched**: each worker keeps one pair in flight: ``TryCompleteElseWatch(wait=true)``
  on a fresh key, then ``CheckAndComplete`` on it (re-sent while it finds no watcher: the
  signal overtook the long-poll), then the long-poll's answer;
- **batch form**: each worker keeps B pairs in flight: ``BatchTryCompleteElseWatch(wait=true)``
  of B fresh keys, then ``BatchCheckAndComplete`` of them (the ones that found no watcher
  re-sent), then the batch long-poll's answer.

A pair's latency runs from sending the signal to receiving the long-poll's answer. The
same code drives the purgatory server and the bare grpc.aio server (``bench.service_bare``),
and the lateness, observability and profiling benchmarks reuse it as their load.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import OWN_CONNECTION
from bench._service_report import Run, drive

__all__ = ["grpc_batched", "grpc_unbatched", "watch_request"]


def watch_request(key: str, wait: bool = True) -> Any:
    return pb.TryCompleteElseWatchRequest(
        purgatory="default", keys=[key], timeout_ms=600_000, wait=wait
    )


async def grpc_unbatched(name: str, target: str, concurrency: int, a: argparse.Namespace) -> Run:
    channels = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(a.channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]  # type: ignore[no-untyped-call]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        stub = stubs[w % len(stubs)]
        while time.perf_counter() < end:
            serial[0] += 1
            key = f"{w}-{serial[0]}"
            waiting = asyncio.ensure_future(stub.TryCompleteElseWatch(watch_request(key)))
            await asyncio.sleep(0)  # the long-poll goes out first
            t0 = time.perf_counter()
            signal_req = pb.CheckAndCompleteRequest(purgatory="default", key=key)
            while (await stub.CheckAndComplete(signal_req)).completed == 0:
                run.retries += 1  # the signal overtook the watch: send it again
            await waiting
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += 1

    try:
        return await drive(Run(name, concurrency), concurrency, worker, a.duration, a.warmup)
    finally:
        for c in channels:
            await c.close()


async def grpc_batched(name: str, target: str, a: argparse.Namespace) -> Run:
    channels = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(a.channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]  # type: ignore[no-untyped-call]
    serial = [0]
    size = a.batch_size

    async def worker(w: int, run: Run, end: float) -> None:
        stub = stubs[w % len(stubs)]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{w}-{serial[0]}-{i}" for i in range(size)]
            ops = [pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys]
            waiting = asyncio.ensure_future(
                stub.BatchTryCompleteElseWatch(
                    pb.BatchTryCompleteElseWatchRequest(
                        purgatory="default", operations=ops, wait=True
                    )
                )
            )
            await asyncio.sleep(0)
            t0 = time.perf_counter()
            todo = keys
            while todo:
                resp = await stub.BatchCheckAndComplete(
                    pb.BatchCheckAndCompleteRequest(
                        purgatory="default", signals=[pb.KeySignal(key=k) for k in todo]
                    )
                )
                todo = [k for k, n in zip(todo, resp.completed_per_signal, strict=True) if not n]
                run.retries += len(todo)
            await waiting
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += size

    concurrency = a.batch_workers * size
    try:
        return await drive(Run(name, concurrency), a.batch_workers, worker, a.duration, a.warmup)
    finally:
        for c in channels:
            await c.close()
