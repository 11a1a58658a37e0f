"""Dispatcher benchmark: acknowledged signals per second, batching dispatcher vs one RPC
per signal, side by side against one purgatory server process.

Scenarios, interleaved over ``--rounds`` (each ``--duration`` seconds, after a warm-up):

- **async, one RPC per signal**: ``--concurrency`` coroutines, each awaiting
  ``CheckAndComplete`` in a loop (one signal in flight per coroutine);
- **async dispatcher**: one producer keeps ``--window`` signals outstanding on an
  :class:`~purgatory_client.AsyncBatchingDispatcher` (defaults: batches of up to 500,
  5 ms batching delay, 4 batches in flight on one Session stream) and counts resolved
  futures;
- **sync, one RPC per signal**: ``--concurrency`` threads of the blocking client;
- **sync dispatcher**: one producer thread keeps ``--window`` signals outstanding on a
  :class:`~purgatory_client.BatchingDispatcher`.

Every signal goes to a distinct key nobody watches (the server records it and finds no
watcher), so the figure is the cost of carrying and applying signals. A signal counts
once its future (or RPC) has answered. Ratios are taken per round (median reported).

    python -m bench.dispatcher_bench [--duration 3] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from purgatory_client import AsyncPurgatoryClient, PurgatoryClient

from bench._common import bench_server, markdown_table, run_context, write_json

ASYNC_RPC = "async, one RPC per signal"
ASYNC_DISPATCH = "async dispatcher"
SYNC_RPC = "sync, one RPC per signal"
SYNC_DISPATCH = "sync dispatcher"


async def async_rpc(target: str, a: argparse.Namespace, seconds: float) -> int:
    done = [0]
    async with AsyncPurgatoryClient(target) as client:

        async def worker(w: int) -> None:
            end = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < end:
                n += 1
                await client.check_and_complete(f"ar-{w}-{n}")
                done[0] += 1

        await asyncio.gather(*(worker(w) for w in range(a.concurrency)))
    return done[0]


async def async_dispatch(target: str, a: argparse.Namespace, seconds: float) -> int:
    done = 0
    async with AsyncPurgatoryClient(target) as client:
        dispatcher = client.dispatcher()
        outstanding: collections.deque[asyncio.Future[int]] = collections.deque()
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            while len(outstanding) < a.window:
                n += 1
                outstanding.append(dispatcher.signal(f"ad-{n}"))
            await outstanding.popleft()
            done += 1
            while outstanding and outstanding[0].done():
                outstanding.popleft().result()
                done += 1
        await dispatcher.shutdown()
    return done


def sync_rpc(target: str, a: argparse.Namespace, seconds: float) -> int:
    done = [0]
    lock = threading.Lock()
    with PurgatoryClient(target) as client:

        def worker(w: int) -> None:
            end = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < end:
                n += 1
                client.check_and_complete(f"sr-{w}-{n}")
                with lock:
                    done[0] += 1

        with ThreadPoolExecutor(a.concurrency) as pool:
            list(pool.map(worker, range(a.concurrency)))
    return done[0]


def sync_dispatch(target: str, a: argparse.Namespace, seconds: float) -> int:
    done = 0
    with PurgatoryClient(target) as client, client.dispatcher() as dispatcher:
        outstanding: collections.deque[Future[int]] = collections.deque()
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            while len(outstanding) < a.window:
                n += 1
                outstanding.append(dispatcher.signal(f"sd-{n}"))
            outstanding.popleft().result(30)
            done += 1
            while outstanding and outstanding[0].done():
                outstanding.popleft().result()
                done += 1
    return done


async def measure(name: str, target: str, a: argparse.Namespace) -> float:
    """Signals per second of one scenario, after a warm-up of the same scenario."""

    async def once(seconds: float) -> tuple[int, float]:
        start = time.perf_counter()
        if name == ASYNC_RPC:
            n = await async_rpc(target, a, seconds)
        elif name == ASYNC_DISPATCH:
            n = await async_dispatch(target, a, seconds)
        elif name == SYNC_RPC:
            n = await asyncio.to_thread(sync_rpc, target, a, seconds)
        else:
            n = await asyncio.to_thread(sync_dispatch, target, a, seconds)
        return n, time.perf_counter() - start

    await once(a.warmup)
    n, elapsed = await once(a.duration)
    return n / elapsed


async def main_async(a: argparse.Namespace) -> dict[str, Any]:
    names = [ASYNC_RPC, ASYNC_DISPATCH, SYNC_RPC, SYNC_DISPATCH]
    rates: dict[str, list[float]] = {n: [] for n in names}
    with (
        tempfile.TemporaryDirectory(prefix="dispatcher-bench-") as tmp,
        bench_server(Path(tmp), "purgatory") as server,
    ):
        target = server.address
        for r in range(a.rounds):
            for name in names:
                rates[name].append(await measure(name, target, a))
            print(f"round {r + 1}/{a.rounds} done", flush=True)
    rows = [
        [n, round(statistics.median(v)), round(min(v)), round(max(v))] for n, v in rates.items()
    ]
    print(markdown_table(["scenario", "signals/s (median)", "min", "max"], rows))
    checks = {}
    for disp, rpc in ((ASYNC_DISPATCH, ASYNC_RPC), (SYNC_DISPATCH, SYNC_RPC)):
        each = [d / u for d, u in zip(rates[disp], rates[rpc], strict=True)]
        checks[f"{disp} / {rpc}"] = {"median": statistics.median(each), "rounds": each}
        print(
            f"- {disp} / {rpc}: {statistics.median(each):.1f}x ["
            + ", ".join(f"{x:.1f}" for x in each)
            + "]"
        )
    return {"context": run_context(), "args": vars(a), "rates": rates, "checks": checks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per scenario")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32, help="RPC callers in flight")
    parser.add_argument("--window", type=int, default=4000, help="dispatcher tasks queued")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"dispatcher bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    payload = asyncio.run(main_async(a))
    print(f"\nraw numbers: {write_json('dispatcher_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
