"""The streaming form of the service benchmark: watch -> signal -> outcome pairs over
``Session`` streams (split out of service_bench.py, which stays under 500 lines).

Each worker owns one bidirectional stream and keeps B pairs in flight on it: a frame of B
watches (fresh keys), then a frame of the B signals for their keys, then it reads until
the signal frame's acknowledgement and the B outcomes have arrived. ``--streams`` workers
(default 4) with B = ``--batch-size`` (default 100) keep as many operations waiting as the
batch form's 4 x 100. The same client code drives the bare grpc.aio server's Session
(``bench.service_bare``), which only matches keys in a dict: the transport's ceiling for
this shape. A pair's latency runs from writing the signal frame to the last outcome.
"""

from __future__ import annotations

import argparse
import time

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._service_report import STREAM, Run, drive

__all__ = ["STREAM", "grpc_stream"]


OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


async def grpc_stream(name: str, target: str, a: argparse.Namespace) -> Run:
    channels = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(a.channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]  # type: ignore[no-untyped-call]
    calls = [stubs[w % len(stubs)].Session() for w in range(a.streams)]
    size = a.batch_size
    serial = [0]
    request_ids = [0] * a.streams

    async def worker(w: int, run: Run, end: float) -> None:
        call = calls[w]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{w}-{serial[0]}-{i}" for i in range(size)]
            request_ids[w] += 2
            watch_id, signal_id = request_ids[w] - 1, request_ids[w]
            await call.write(
                pb.SessionRequest(
                    request_id=watch_id,
                    purgatory="default",
                    watches=[pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys],
                )
            )
            await call.write(
                pb.SessionRequest(
                    request_id=signal_id,
                    purgatory="default",
                    signals=[pb.KeySignal(key=k) for k in keys],
                )
            )
            t0 = time.perf_counter()
            outcomes = 0
            acked = False
            while outcomes < size or not acked:
                message = await call.read()
                if message is grpc.aio.EOF:
                    raise RuntimeError("session ended early")
                if message.HasField("ack"):
                    if message.ack.code:
                        raise RuntimeError(f"frame refused: {message.ack.message}")
                    if message.ack.request_id == signal_id:
                        acked = True
                        missed = size - sum(message.ack.completed_per_signal)
                        if missed:
                            raise RuntimeError(f"{missed} signals found no watcher")
                outcomes += len(message.outcomes)
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += size

    try:
        return await drive(Run(name, a.streams * size), a.streams, worker, a.duration, a.warmup)
    finally:
        for call in calls:
            call.cancel()
        for c in channels:
            await c.close()
