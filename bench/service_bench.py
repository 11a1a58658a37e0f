"""Service benchmark: long-poll watch -> signal -> outcome pairs over real sockets.

Side by side in one run, each server in its own process (so the load generator never
shares a GIL with it), the load generator in this process:

- **bare grpc.aio** (``bench.service_bare``): the same messages, RPCs that only park and
  resolve an asyncio Future — the transport's ceiling;
- **purgatory**, unbatched: ``TryCompleteElseWatch(wait=true)`` + ``CheckAndComplete``;
- **purgatory**, batch form: ``BatchTryCompleteElseWatch(wait=true)`` of B operations +
  ``BatchCheckAndComplete`` of their B keys;
- the bare server's batch form, for reference;
- **Redis** (Debian's ``redis-server`` on a loopback port, redis-py asyncio): ``BLPOP`` +
  ``LPUSH`` at the unbatched concurrency, and at the batch form's concurrency (one BLPOP
  connection per waiting operation, the B LPUSHes pipelined);
- a **burst** of 10,000 long-polls sent at once to a fresh purgatory server: the server's
  RSS growth per waiting long-poll, and how many calls were CANCELLED (must be 0).

A pair's latency is measured from sending the signal to receiving the long-poll's answer.
Unbatched and Redis workers keep one pair in flight each; batch workers keep B.

    python -m bench.service_bench [--duration 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import markdown_table, percentile, run_context, write_json

OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@contextlib.contextmanager
def process(cmd: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def purgatory_cmd(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "purgatory_server",
        "--listen",
        f"127.0.0.1:{port}",
        "--log-level",
        "WARNING",
    ]


def bare_cmd(port: int) -> list[str]:
    return [sys.executable, "-m", "bench.service_bare", "--port", str(port)]


async def wait_ready(target: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)


@dataclass
class Run:
    name: str
    concurrency: int
    pairs: int = 0
    retries: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.pairs / self.seconds if self.seconds else 0.0

    def row(self, baseline: float | None) -> list[object]:
        lat = sorted(self.latencies)
        ratio = f"{self.rate / baseline:.2f}x" if baseline else "-"
        return [
            self.name,
            self.concurrency,
            self.pairs,
            round(self.rate),
            percentile(lat, 0.5) * 1e3,
            percentile(lat, 0.99) * 1e3,
            self.retries,
            ratio,
        ]


Worker = Callable[[int, Run, float], Awaitable[None]]


async def drive(run: Run, workers: int, worker: Worker, duration: float, warmup: float) -> Run:
    """Warm up, then let ``workers`` loop for ``duration`` seconds and count their pairs."""
    scratch = Run(run.name, run.concurrency)
    end = time.perf_counter() + warmup
    await asyncio.gather(*(worker(w, scratch, end) for w in range(workers)))
    start = time.perf_counter()
    await asyncio.gather(*(worker(w, run, start + duration) for w in range(workers)))
    run.seconds = time.perf_counter() - start
    return run


def _watch(key: str, wait: bool = True) -> Any:
    return pb.TryCompleteElseWatchRequest(
        purgatory="default", keys=[key], timeout_ms=600_000, wait=wait
    )


async def grpc_unbatched(name: str, target: str, concurrency: int, a: argparse.Namespace) -> Run:
    channels = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(a.channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        stub = stubs[w % len(stubs)]
        while time.perf_counter() < end:
            serial[0] += 1
            key = f"{w}-{serial[0]}"
            waiting = asyncio.ensure_future(stub.TryCompleteElseWatch(_watch(key)))
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
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]
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


async def burst(target: str, pid: int, n: int, channels: int) -> dict[str, Any]:
    """n long-polls at once on fresh server: RSS growth per waiter, CANCELLED count."""
    chans = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in chans]
    try:
        for stub in stubs:  # connections up before the baseline is taken
            await stub.ListPurgatories(pb.ListPurgatoriesRequest())
        await asyncio.sleep(0.5)
        before = rss_kib(pid)
        t0 = time.perf_counter()
        calls = [
            asyncio.ensure_future(
                stubs[i % channels].TryCompleteElseWatch(_watch(f"b{i}"), timeout=300)
            )
            for i in range(n)
        ]
        info_req = pb.GetPurgatoryRequest(name="default")
        while (await stubs[0].GetPurgatory(info_req)).purgatory.pending < n:
            if sum(c.done() for c in calls) > 0:
                break  # some call already ended: count it below instead of waiting forever
            await asyncio.sleep(0.05)
        registered_s = time.perf_counter() - t0
        await asyncio.sleep(0.5)
        after = rss_kib(pid)
        for start in range(0, n, 1000):
            keys = [f"b{i}" for i in range(start, min(n, start + 1000))]
            await stubs[0].BatchCheckAndComplete(
                pb.BatchCheckAndCompleteRequest(
                    purgatory="default", signals=[pb.KeySignal(key=k) for k in keys]
                )
            )
        results = await asyncio.gather(*calls, return_exceptions=True)
        answered_s = time.perf_counter() - t0
    finally:
        for c in chans:
            await c.close()
    codes: dict[str, int] = {}
    for r in results:
        code = r.code().name if isinstance(r, grpc.aio.AioRpcError) else "OK"
        codes[code] = codes.get(code, 0) + 1
    return {
        "n": n,
        "rss_before_kib": before,
        "rss_waiting_kib": after,
        "bytes_per_waiter": (after - before) * 1024 / n,
        "registered_s": registered_s,
        "answered_s": answered_s,
        "codes": codes,
    }


async def main_async(a: argparse.Namespace) -> dict[str, Any]:
    runs: list[Run] = []
    bursts: dict[str, Any] = {}
    p_port, b_port = free_port(), free_port()
    with process(bare_cmd(b_port)) as bare, process(purgatory_cmd(p_port)):
        await wait_ready(f"127.0.0.1:{b_port}")
        await wait_ready(f"127.0.0.1:{p_port}")
        bare_target, purg_target = f"127.0.0.1:{b_port}", f"127.0.0.1:{p_port}"
        c = a.concurrency
        runs.append(await grpc_unbatched("bare grpc.aio, unbatched", bare_target, c, a))
        runs.append(await grpc_unbatched("purgatory, unbatched", purg_target, c, a))
        runs.append(await grpc_batched("bare grpc.aio, batch form", bare_target, a))
        runs.append(await grpc_batched("purgatory, batch form", purg_target, a))
        bursts["bare grpc.aio"] = await burst(bare_target, bare.pid, a.burst, a.channels)
    redis_server = shutil.which("redis-server")
    if redis_server and not a.skip_redis:
        r_port = free_port()
        cmd = [
            redis_server,
            "--port",
            str(r_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--maxclients",
            "10000",
        ]
        with process(cmd):
            import redis.asyncio as aioredis

            probe = aioredis.Redis(port=r_port)
            for _ in range(100):
                with contextlib.suppress(Exception):
                    if await probe.ping():
                        break
                await asyncio.sleep(0.05)
            await probe.aclose()
            runs.append(
                await redis_pairs("redis BLPOP/LPUSH, unbatched", r_port, a.concurrency, 1, a)
            )
            runs.append(
                await redis_pairs(
                    "redis BLPOP/LPUSH, pipelined", r_port, a.batch_workers, a.batch_size, a
                )
            )
    # The burst last, on a fresh purgatory server (clean RSS baseline).
    p2 = free_port()
    with process(purgatory_cmd(p2)) as fresh:
        await wait_ready(f"127.0.0.1:{p2}")
        bursts["purgatory"] = await burst(f"127.0.0.1:{p2}", fresh.pid, a.burst, a.channels)
    return {"runs": runs, "bursts": bursts}


def report(result: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    runs: list[Run] = result["runs"]
    by = {r.name: r for r in runs}
    bare_u = by["bare grpc.aio, unbatched"].rate
    redis_p = by.get("redis BLPOP/LPUSH, pipelined")
    redis_u = by.get("redis BLPOP/LPUSH, unbatched")
    baselines = {
        "purgatory, unbatched": bare_u,
        "purgatory, batch form": redis_p.rate if redis_p else None,
        "bare grpc.aio, batch form": redis_p.rate if redis_p else None,
        "redis BLPOP/LPUSH, unbatched": bare_u,
    }
    headers = ["system", "in flight", "pairs", "pairs/s", "p50 ms", "p99 ms", "re-signals", "ratio"]
    print(markdown_table(headers, [r.row(baselines.get(r.name)) for r in runs]))
    print()
    print(
        "ratio: purgatory unbatched and redis unbatched vs bare grpc.aio unbatched; "
        "batch forms vs redis pipelined (the same number of waiting operations)."
    )
    print()
    rows = []
    for name, b in result["bursts"].items():
        codes = ", ".join(f"{k}={v}" for k, v in sorted(b["codes"].items()))
        rows.append(
            [name, b["n"], b["bytes_per_waiter"], b["registered_s"], b["answered_s"], codes]
        )
    print(
        markdown_table(
            ["burst", "long-polls", "RSS bytes/waiter", "all waiting s", "all answered s", "codes"],
            rows,
        )
    )
    checks = {
        "unbatched >= 0.9x bare": by["purgatory, unbatched"].rate / bare_u,
        "batch >= 3x redis pipelined": (by["purgatory, batch form"].rate / redis_p.rate)
        if redis_p
        else None,
        "batch >= 3x redis unbatched": (by["purgatory, batch form"].rate / redis_u.rate)
        if redis_u
        else None,
        "burst CANCELLED": result["bursts"]["purgatory"]["codes"].get("CANCELLED", 0),
    }
    print()
    for k, v in checks.items():
        print(f"- {k}: {v if not isinstance(v, float) else round(v, 2)}")
    return {
        "context": run_context(),
        "args": vars(a),
        "runs": [
            {
                "name": r.name,
                "in_flight": r.concurrency,
                "pairs": r.pairs,
                "seconds": r.seconds,
                "pairs_per_s": r.rate,
                "retries": r.retries,
                "p50_ms": percentile(sorted(r.latencies), 0.5) * 1e3,
                "p99_ms": percentile(sorted(r.latencies), 0.99) * 1e3,
            }
            for r in runs
        ],
        "bursts": result["bursts"],
        "checks": checks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per scenario")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=32, help="unbatched pairs in flight")
    parser.add_argument("--channels", type=int, default=2, help="client connections")
    parser.add_argument("--batch-workers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"service bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    payload = report(asyncio.run(main_async(a)), a)
    print(f"\nraw numbers: {write_json('service_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
