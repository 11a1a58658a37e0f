"""The service benchmark's Redis baselines: ``BLPOP`` waits answered by ``LPUSH`` signals.

Debian's ``redis-server`` on a loopback port (it cannot bind port 0 and report the port,
so this is the one benchmark server started on :func:`harness.free_port`), redis-py
asyncio with the hiredis parser:

- :func:`redis_pairs` with one waiter per worker: BLPOP + LPUSH at the unbatched
  concurrency; with B waiters per worker: one BLPOP connection per waiting operation, the
  B LPUSHes pipelined;
- :func:`redis_batched`: Redis's own batch form, B BLPOPs pipelined on one connection per
  worker (see its docstring).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench._service_report import Run, drive
from harness import free_port

__all__ = ["redis_batched", "redis_pairs", "redis_server"]


def redis_cmd(redis_server: str, port: int) -> list[str]:
    return [
        redis_server,
        *("--port", str(port), "--bind", "127.0.0.1"),
        *("--save", "", "--appendonly", "no", "--daemonize", "no"),
        *("--maxclients", "10000"),
    ]


@contextlib.asynccontextmanager
async def redis_server(executable: str, root: Path) -> AsyncIterator[int]:
    """A redis-server on loopback for the block (log in ``root``); its port once it answers."""
    import redis.asyncio as aioredis

    port = free_port()
    with (root / "redis.log").open("ab") as log:
        proc = subprocess.Popen(redis_cmd(executable, port), stdout=log, stderr=log)
    try:
        probe = aioredis.Redis(port=port)
        try:
            for _ in range(100):
                with contextlib.suppress(Exception):
                    if await probe.ping():
                        break
                if proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {proc.returncode}")
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("redis-server did not answer")
        finally:
            await probe.aclose()
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def redis_pairs(
    name: str, port: int, workers: int, per_worker: int, a: argparse.Namespace
) -> Run:
    import redis.asyncio as aioredis

    waiters = [
        [aioredis.Redis(port=port, single_connection_client=True) for _ in range(per_worker)]
        for _ in range(workers)
    ]
    signallers = [aioredis.Redis(port=port, single_connection_client=True) for _ in range(workers)]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        conns, signaller = waiters[w], signallers[w]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{w}-{serial[0]}-{i}" for i in range(per_worker)]
            waiting = [
                asyncio.ensure_future(c.blpop([k], timeout=0))
                for c, k in zip(conns, keys, strict=True)
            ]
            await asyncio.sleep(0)
            t0 = time.perf_counter()
            if per_worker == 1:
                await signaller.lpush(keys[0], b"1")
            else:
                pipe = signaller.pipeline(transaction=False)
                for k in keys:
                    pipe.lpush(k, b"1")
                await pipe.execute()
            await asyncio.gather(*waiting)
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += per_worker

    try:
        return await drive(Run(name, workers * per_worker), workers, worker, a.duration, a.warmup)
    finally:
        for c in [*signallers, *(c for ws in waiters for c in ws)]:
            await c.aclose()


async def redis_batched(name: str, port: int, a: argparse.Namespace, prefix: str = "") -> Run:
    """Redis's own batch form: each worker pipelines B BLPOPs on ONE connection, and the
    B LPUSHes on another.

    Redis serves a connection's commands in order, so the first BLPOP blocks until its
    key is pushed and each later one finds its value already there: every wait is
    answered, and the pipeline's reply arrives once all B are, which is exactly what the
    batch long-poll promises. B waits are in flight per worker, as in the batch form.
    This is the cheapest way we found to have Redis do this work (far cheaper than one
    connection per waiter), so it is the baseline the batch form is judged against.
    ``prefix`` keeps the keys of several load processes apart (bench.workers_bench).
    """
    import redis.asyncio as aioredis

    size = a.batch_size
    waiters = [
        aioredis.Redis(port=port, single_connection_client=True) for _ in range(a.batch_workers)
    ]
    signallers = [
        aioredis.Redis(port=port, single_connection_client=True) for _ in range(a.batch_workers)
    ]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        waiter, signaller = waiters[w], signallers[w]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{prefix}{w}-{serial[0]}-{i}" for i in range(size)]
            waits = waiter.pipeline(transaction=False)
            for k in keys:
                waits.blpop([k], timeout=0)
            waiting = asyncio.ensure_future(waits.execute())
            await asyncio.sleep(0)
            t0 = time.perf_counter()
            pushes = signaller.pipeline(transaction=False)
            for k in keys:
                pushes.lpush(k, b"1")
            await pushes.execute()
            answers = await waiting
            if len(answers) != size or any(x is None for x in answers):
                raise RuntimeError("a pipelined BLPOP came back without its value")
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += size

    try:
        return await drive(
            Run(name, a.batch_workers * size), a.batch_workers, worker, a.duration, a.warmup
        )
    finally:
        for c in [*waiters, *signallers]:
            await c.aclose()
