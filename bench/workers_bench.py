"""Workers benchmark: stream-form pairs/s of ``--workers 1`` vs ``--workers N``, and
Redis's batch form, side by side in one run.

Why: one server process runs on one event loop, so it uses one core; ``workers`` spreads
purgatories over processes (docs/service.md, "Workers"). What it can gain is bounded by
the cores left once the load generator has its share, so the load comes from
``--load-procs`` processes of their own (``bench._workers_load``), never from this one.

Each round measures every server in turn (all started once, idle while not measured),
then Redis's batch form (B BLPOPs pipelined per connection, ``bench._service_redis``)
from the same load processes, ``--batch-workers`` connection pairs each. The ``--purgatories`` names
are chosen so that the largest worker count gets the same number of them per worker;
every load process spreads its ``--streams`` Session streams over all of them, each
stream at its purgatory's owner (found as a client finds it: one redirect). Ratios are
per round (median reported) and over the totals.

    python -m bench.workers_bench [--workers 1,2] [--rounds 3] [--duration 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from purgatory_server._service.workers.plan import WorkerPlan

from bench._common import (
    bench_server,
    markdown_table,
    percentile,
    ratio,
    run_context,
    times,
    write_json,
)
from bench._service_redis import redis_server
from bench._workers_load import run_load, run_redis_load
from harness import serving

REDIS = "Redis batch form (pipelined BLPOPs)"
START_SLACK_S = 1.0  # load processes are already warm: a second to line them up


def balanced_names(count: int, workers: int) -> list[str]:
    """``count`` purgatory names, ``count // workers`` owned by each of ``workers``."""
    plan = WorkerPlan(0, "127.0.0.1", 1, tuple(range(workers)), "127.0.0.1")
    per, taken, names = max(1, count // workers), [0] * workers, []
    i = 0
    while len(names) < count:
        name, i = f"part-{i}", i + 1
        owner = plan.owner_of(name)
        if taken[owner] < per or all(t >= per for t in taken):
            taken[owner] += 1
            names.append(name)
    return names


async def measure(
    pool: ProcessPoolExecutor, target: str, names: list[str], tag: str, a: Any
) -> dict[str, Any]:
    """Every load process against ``target`` at once; pairs/s summed over them."""
    times = (time.time() + START_SLACK_S, a.warmup, a.duration)
    futures = [
        asyncio.wrap_future(
            pool.submit(
                run_load,
                target,
                names,
                streams=a.streams,
                size=a.batch_size,
                tag=f"{tag}{p}",
                times=times,
            )
        )
        for p in range(a.load_procs)
    ]
    parts = await asyncio.gather(*futures)
    latencies = sorted(x for part in parts for x in part["latencies"])
    pairs = sum(part["pairs"] for part in parts)
    return {"pairs": pairs, "rate": pairs / a.duration, "p50_ms": percentile(latencies, 0.5) * 1e3}


async def measure_redis(pool: ProcessPoolExecutor, port: int, tag: str, a: Any) -> float:
    """Redis's batch form from every load process at once; pairs/s summed over them."""
    times = (time.time() + START_SLACK_S, a.warmup, a.duration)
    opts = argparse.Namespace(batch_size=a.batch_size, batch_workers=a.batch_workers)
    futures = [
        asyncio.wrap_future(pool.submit(run_redis_load, port, f"{tag}{p}-", times, opts))
        for p in range(a.load_procs)
    ]
    parts = await asyncio.gather(*futures)
    return sum(part["pairs"] / part["seconds"] if part["seconds"] else 0.0 for part in parts)


async def main_async(a: argparse.Namespace, root: Path) -> dict[str, Any]:
    counts = [int(n) for n in a.workers.split(",")]
    names = balanced_names(a.purgatories, max(counts))
    servers = {}
    for n in counts:
        args = ["--workers", str(n)]
        for name in names:
            args += ["--purgatory", name]
        servers[n] = bench_server(root, f"workers{n}", *args, start_timeout_s=60)
    rates: dict[str, list[float]] = {f"{n} worker(s)": [] for n in counts}
    p50: dict[str, list[float]] = {k: [] for k in rates}
    ctx = multiprocessing.get_context("spawn")  # grpc does not survive fork
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(serving(*servers.values()))
        pool = stack.enter_context(ProcessPoolExecutor(a.load_procs, mp_context=ctx))
        redis = None if a.skip_redis else shutil.which("redis-server")
        if redis is not None:
            port = await stack.enter_async_context(redis_server(redis, root))
            rates[REDIS] = []
        else:
            print("Redis baseline skipped (--skip-redis or no redis-server)", file=sys.stderr)
        for r in range(a.rounds):
            for n in counts:
                key = f"{n} worker(s)"
                got = await measure(pool, servers[n].address, names, f"r{r}w{n}-", a)
                rates[key].append(got["rate"])
                p50[key].append(got["p50_ms"])
            if redis is not None:
                rates[REDIS].append(await measure_redis(pool, port, f"r{r}-", a))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    return {"names": names, "rates": rates, "p50_ms": p50}


def report(result: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    rates: dict[str, list[float]] = result["rates"]
    base = next(iter(rates))  # the first worker count (1 by default)
    rows = []
    for name, per_round in rates.items():
        vs_base = [ratio(x, b) for x, b in zip(per_round, rates[base], strict=True)]
        vs_redis = (
            [ratio(x, y) for x, y in zip(per_round, rates[REDIS], strict=True)]
            if REDIS in rates
            else []
        )
        rows.append(
            [
                name,
                ", ".join(f"{x:,.0f}" for x in per_round),
                statistics.median(per_round),
                times(vs_base),
                times(vs_redis),
            ]
        )
    headers = ["server", "pairs/s per round", "median pairs/s", f"vs {base}", "vs Redis batch"]
    print(markdown_table(headers, rows))
    print(
        f"\npurgatories: {', '.join(result['names'])}; load: {a.load_procs} processes x "
        f"{a.streams} streams x {a.batch_size} pairs in flight; {os.cpu_count()} CPUs"
    )
    return {"context": run_context(), "args": vars(a), **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--purgatories", type=int, default=4)
    parser.add_argument("--load-procs", type=int, default=2, help="load generator processes")
    parser.add_argument("--streams", type=int, default=4, help="Session streams per load process")
    parser.add_argument("--batch-size", type=int, default=100, help="pairs in flight per stream")
    parser.add_argument("--batch-workers", type=int, default=4, help="Redis connections")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"workers bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="workers-bench-") as tmp:
        payload = report(asyncio.run(main_async(a, Path(tmp))), a)
    print(f"\nraw numbers: {write_json('workers_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
