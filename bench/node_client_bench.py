"""Long-poll pairs/s through the Node.js client vs the Python asyncio client, same run.

One purgatory server (its own process), then interleaved rounds: the Python
``AsyncPurgatoryClient`` in this process, and the Node.js ``PurgatoryClient`` in a
``node bench/node_longpoll.js`` process, one after the other against the same server
(which of the two goes first alternates by round). A pair is the client's ``wait`` on a
fresh key, ``check_and_complete`` on that key (re-sent if it overtook the long-poll) and
the long-poll's answer, with ``--concurrency`` pairs in flight over one client (one
channel) in both languages. Each side also reports its own process's CPU time per pair
(the Python client runs alone in this process during its phase), which moves less with
the machine's load than pairs/s. The server and the client share the machine's cores, so a
cheaper client leaves more CPU to the server: the ratio shows how much of the service
benchmark's unbatched figure is the Python client's own cost.

    python -m bench.node_client_bench [--rounds 5] [--duration 3] [--json out.json]

Needs ``make node-build`` (client/node/dist) first.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from purgatory_client import AsyncPurgatoryClient

from bench._common import bench_server, markdown_table, percentile, run_context, write_json

NODE_SCRIPT = Path(__file__).resolve().parent / "node_longpoll.js"


async def python_phase(
    client: AsyncPurgatoryClient, concurrency: int, seconds: float, serial: Iterator[int]
) -> Any:
    latencies: list[float] = []
    retries = 0

    async def worker(w: int, end: float) -> int:
        nonlocal retries
        pairs = 0
        while time.perf_counter() < end:
            key = f"py-{next(serial)}"
            waiting = asyncio.ensure_future(client.wait([key], 600_000, operation_id=key))
            await asyncio.sleep(0)  # the long-poll goes out first
            t0 = time.perf_counter()
            while await client.check_and_complete(key) == 0:
                if waiting.done():  # answered without this signal: a bug in the benchmark
                    raise RuntimeError(f"{key} answered early: {waiting.result()}")
                retries += 1
            await waiting
            latencies.append(time.perf_counter() - t0)
            pairs += 1
        return pairs

    cpu0 = time.process_time()
    start = time.perf_counter()
    counts = await asyncio.gather(*(worker(w, start + seconds) for w in range(concurrency)))
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    lat = sorted(latencies)
    return {
        "pairs": sum(counts),
        "seconds": seconds,
        "cpu_us_per_pair": cpu * 1e6 / max(sum(counts), 1),
        "retries": retries,
        "p50_ms": percentile(lat, 0.5) * 1e3,
        "p99_ms": percentile(lat, 0.99) * 1e3,
    }


async def python_round(target: str, a: argparse.Namespace) -> Any:
    async with AsyncPurgatoryClient(target) as client:
        # Keys (and operation ids) never repeat within a server's life: a re-sent id would
        # be answered with that earlier operation's outcome.
        serial = (f"{uuid.uuid4().hex[:8]}-{n}" for n in itertools.count())
        await python_phase(client, a.concurrency, a.warmup, serial)
        return await python_phase(client, a.concurrency, a.duration, serial)


def node_round(target: str, a: argparse.Namespace) -> Any:
    cmd = ["node", str(NODE_SCRIPT), target, str(a.concurrency), str(a.duration), str(a.warmup)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=32, help="pairs in flight")
    parser.add_argument("--json", help="write the raw numbers here")
    a = parser.parse_args()
    context = run_context()
    results: dict[str, list[Any]] = {"python": [], "node": []}
    with (
        tempfile.TemporaryDirectory(prefix="node-client-bench-") as tmp,
        bench_server(Path(tmp), "purgatory") as server,
    ):
        target = server.address
        for r in range(a.rounds):
            order = ["python", "node"] if r % 2 == 0 else ["node", "python"]
            for who in order:
                res = (
                    asyncio.run(python_round(target, a))
                    if who == "python"
                    else node_round(target, a)
                )
                res["rate"] = res["pairs"] / res["seconds"]
                results[who].append(res)
                print(f"round {r + 1}: {who}: {res['rate']:,.0f} pairs/s", file=sys.stderr)
    ratios = [
        n["rate"] / p["rate"] for n, p in zip(results["node"], results["python"], strict=True)
    ]
    rows = []
    for who, label in (
        ("python", "Python AsyncPurgatoryClient"),
        ("node", "Node.js PurgatoryClient"),
    ):
        runs = results[who]
        rows.append(
            [
                label,
                a.concurrency,
                statistics.median(x["rate"] for x in runs),
                min(x["rate"] for x in runs),
                max(x["rate"] for x in runs),
                statistics.median(x["p50_ms"] for x in runs),
                statistics.median(x["p99_ms"] for x in runs),
                statistics.median(x["cpu_us_per_pair"] for x in runs),
            ]
        )
    headers = [
        "client",
        "in flight",
        "pairs/s (median)",
        "min",
        "max",
        "p50 ms",
        "p99 ms",
        "client CPU µs/pair",
    ]
    print(markdown_table(headers, rows))
    print(
        f"\nNode/Python pairs/s: median of per-round ratios {statistics.median(ratios):.2f}x "
        f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
    )
    print(f"load average at start: {context['loadavg_1_5_15']}")
    payload = {"context": context, "args": vars(a), "results": results, "ratios": ratios}
    out = write_json("node_client_bench", payload, a.json)
    print(f"raw numbers: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
