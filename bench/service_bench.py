"""Service benchmark: long-poll watch -> signal -> outcome pairs over real sockets.

Side by side in one run, each server in its own process (so the load generator never
shares a GIL with it), the load generator in this process:

- **bare grpc.aio** (``bench.service_bare``): the same messages, RPCs that only park and
  resolve an asyncio Future — the transport's ceiling;
- **purgatory**, unbatched (``bench._service_unary``, as the batch form):
  ``TryCompleteElseWatch(wait=true)`` + ``CheckAndComplete``;
- **purgatory**, batch form: ``BatchTryCompleteElseWatch(wait=true)`` of B operations +
  ``BatchCheckAndComplete`` of their B keys;
- the bare server's batch form, for reference;
- the **stream form** (``bench._service_stream``): ``--streams`` Session streams, each
  with B watches then B signals in flight per frame pair, on the purgatory and on the
  bare server given the same streaming shape;
- **Redis** (``bench._service_redis``; Debian's ``redis-server`` on a loopback port,
  redis-py asyncio with the hiredis parser): ``BLPOP`` + ``LPUSH`` at the unbatched
  concurrency, and twice at the batch form's concurrency: one BLPOP connection per
  waiting operation with the B LPUSHes pipelined, and Redis's own batch form, B BLPOPs
  pipelined on one connection per worker. Batch forms are compared with the faster.
  Without redis-server on PATH (or with ``--skip-redis``) these are left out, and the run
  says so;
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
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig

from bench._common import OWN_CONNECTION, bench_server, tree_pythonpath, write_json
from bench._service_redis import redis_batched, redis_pairs, redis_server
from bench._service_report import (
    BAT,
    REDIS_BATCH,
    REDIS_PIPE,
    REDIS_UNB,
    STREAM,
    UNB,
    Run,
    report,
)
from bench._service_stream import grpc_stream
from bench._service_unary import grpc_batched, grpc_unbatched, watch_request
from bench.service_bare import bare_server
from harness import ServerProcess, serving


async def burst(server: ServerProcess, n: int, channels: int) -> dict[str, Any]:
    """n long-polls at once on fresh server: RSS growth per waiter, CANCELLED count."""
    target = server.address
    chans = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in chans]
    try:
        for stub in stubs:  # connections up before the baseline is taken
            await stub.ListPurgatories(pb.ListPurgatoriesRequest())
        await asyncio.sleep(0.5)
        before = server.rss_bytes()
        t0 = time.perf_counter()
        calls = [
            asyncio.ensure_future(
                stubs[i % channels].TryCompleteElseWatch(watch_request(f"b{i}"), timeout=300)
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
        after = server.rss_bytes()
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
        "rss_before_kib": before // 1024,
        "rss_waiting_kib": after // 1024,
        "bytes_per_waiter": (after - before) / n,
        "registered_s": registered_s,
        "answered_s": answered_s,
        "codes": codes,
    }


Scenario = tuple[str, Callable[[], Awaitable[Run]]]


def merge(total: Run | None, part: Run) -> Run:
    if total is None:
        return part
    total.pairs += part.pairs
    total.retries += part.retries
    total.seconds += part.seconds
    total.latencies.extend(part.latencies)
    return total


def compare_scenarios(target: str, a: argparse.Namespace) -> list[Scenario]:
    """The purgatory's three forms against a server run from another source tree (e.g.
    the last commit, `git archive HEAD | tar -x -C DIR`): before/after in one run."""
    c, label = a.concurrency, f"purgatory @{a.compare_label}"
    return [
        (f"{label}, unbatched", lambda: grpc_unbatched(f"{label}, u", target, c, a)),
        (f"{label}, batch form", lambda: grpc_batched(f"{label}, b", target, a)),
        (f"{label}, stream form", lambda: grpc_stream(f"{label}, s", target, a)),
    ]


def redis_scenarios(port: int, a: argparse.Namespace) -> list[Scenario]:
    c, bw, bs = a.concurrency, a.batch_workers, a.batch_size
    return [
        (REDIS_UNB, lambda: redis_pairs(REDIS_UNB, port, c, 1, a)),
        (REDIS_PIPE, lambda: redis_pairs(REDIS_PIPE, port, bw, bs, a)),
        (REDIS_BATCH, lambda: redis_batched(REDIS_BATCH, port, a)),
    ]


async def interleave(scenarios: list[Scenario], rounds: int) -> tuple[list[Run], dict[str, Any]]:
    """Every scenario once per round, rounds interleaved; totals and per-round rates."""
    totals: dict[str, Run] = {}
    per_round: dict[str, list[float]] = {name: [] for name, _ in scenarios}
    for r in range(rounds):
        for name, run_one in scenarios:
            part = await run_one()
            part.name = name
            per_round[name].append(part.rate)
            totals[name] = merge(totals.get(name), part)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    return [totals[name] for name, _ in scenarios], per_round


async def main_async(a: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Every scenario once per round, rounds interleaved, all servers up throughout.

    Why rounds: the machine is shared, and its load drifts over a minute. Running every
    system for a short slice in turn, several times, exposes each to the same drift;
    ratios are then taken per round (median reported) as well as over the totals.
    """
    bursts: dict[str, Any] = {}
    c = a.concurrency
    servers = [
        bare_server(root, "bare", a.bare_max_concurrent_rpcs),
        bench_server(root, "purgatory"),
    ]
    if a.compare_src:
        env = {"PYTHONPATH": tree_pythonpath(a.compare_src)}
        servers.append(bench_server(root, "compare", env=env))
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(serving(*servers))
        bare, purg = servers[0].address, servers[1].address
        scenarios: list[Scenario] = [
            ("bare grpc.aio, unbatched", lambda: grpc_unbatched(UNB[0], bare, c, a)),
            ("purgatory, unbatched", lambda: grpc_unbatched(UNB[1], purg, c, a)),
            ("bare grpc.aio, batch form", lambda: grpc_batched(BAT[0], bare, a)),
            ("purgatory, batch form", lambda: grpc_batched(BAT[1], purg, a)),
            (STREAM[0], lambda: grpc_stream(STREAM[0], bare, a)),
            (STREAM[1], lambda: grpc_stream(STREAM[1], purg, a)),
        ]
        if a.compare_src:
            scenarios += compare_scenarios(servers[2].address, a)
        redis = shutil.which("redis-server")
        if a.skip_redis:
            print("Redis baselines skipped (--skip-redis)", file=sys.stderr)
        elif redis is None:
            print("Redis baselines skipped: no redis-server on PATH", file=sys.stderr)
        else:
            port = await stack.enter_async_context(redis_server(redis, root))
            scenarios += redis_scenarios(port, a)
        runs, per_round = await interleave(scenarios, a.rounds)
        bursts["bare grpc.aio"] = await burst(servers[0], a.burst, a.channels)
    # The purgatory burst last, on a fresh server (clean RSS baseline).
    with bench_server(root, "fresh") as fresh:
        bursts["purgatory"] = await burst(fresh, a.burst, a.channels)
    return {"runs": runs, "per_round": per_round, "bursts": bursts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", type=float, default=2.0, help="seconds per scenario per round"
    )
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds before each")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--bare-max-concurrent-rpcs",
        type=int,
        default=ServerConfig().max_concurrent_rpcs,
        help="the bare server's grpc.aio RPC limiter; defaults to the purgatory server's "
        "max_concurrent_rpcs, so both run the same transport; 0 turns it off",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="unbatched pairs in flight")
    parser.add_argument("--channels", type=int, default=2, help="client connections")
    parser.add_argument("--batch-workers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--streams", type=int, default=4, help="Session streams (stream form)")
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument(
        "--compare-src", help="also bench a purgatory server run from this source tree"
    )
    parser.add_argument("--compare-label", default="baseline", help="its name in the table")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"service bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="service-bench-") as tmp:
        payload = report(asyncio.run(main_async(a, Path(tmp))), a)
    print(f"\nraw numbers: {write_json('service_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
