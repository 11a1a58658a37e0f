"""The Node.js client vs the Python asyncio client, same run: long-poll pairs/s, watchMany
and dispatcher rates.

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

Two Session workloads run in the same rounds, each side in turn against the same server
(``node bench/node_session.js`` for Node.js): **watchMany**, ``--wm-ops`` pure timers
(timeout 10 ms, fresh ids) registered by one ``watch_many`` / ``watchMany`` call (frames
of 100 on one stream), timed from the call to the last outcome: operations registered and
answered per second; and the **dispatcher**, one producer keeping ``--window`` signals
outstanding on the client's batching dispatcher (default config) for ``--duration``
seconds: acknowledged signals per second. Each is warmed up with a tenth of the work.

    python -m bench.node_client_bench [--rounds 5] [--duration 3] [--wm-ops 5000]
        [--window 2000] [--json out.json]

Needs ``make node-build`` (client/node/dist) first.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from purgatory_client import AsyncPurgatoryClient, OperationSpec, OperationState

from bench._common import bench_server, markdown_table, percentile, run_context, write_json
from bench._rounds import Rounds

NODE_SCRIPT = Path(__file__).resolve().parent / "node_longpoll.js"
NODE_SESSION = Path(__file__).resolve().parent / "node_session.js"
# The workloads: the long-poll pairs, then the two Session ones (rate: ops/s).
WORKLOADS = ("longpoll", "watchmany", "dispatcher")
CLIENTS = ("python", "node")  # which goes first alternates by round


async def python_phase(
    client: AsyncPurgatoryClient, concurrency: int, seconds: float, serial: Iterator[str]
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


async def python_watch_many(client: AsyncPurgatoryClient, count: int) -> int:
    tag = uuid.uuid4().hex[:8]
    specs = [OperationSpec((), 10, operation_id=f"pwm-{tag}-{i}") for i in range(count)]
    ops = 0
    async for event in client.watch_many(specs):
        if event.state is not OperationState.EXPIRED:
            raise RuntimeError(f"{event.operation_id}: {event.state}")
        ops += 1
    return ops


async def python_dispatch(client: AsyncPurgatoryClient, seconds: float, window: int) -> int:
    dispatcher = client.dispatcher()
    tag = uuid.uuid4().hex[:8]
    outstanding: collections.deque[asyncio.Future[int]] = collections.deque()
    ops = n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        while len(outstanding) < window:
            outstanding.append(dispatcher.signal(f"pd-{tag}-{n}"))
            n += 1
        await outstanding.popleft()
        ops += 1
    await asyncio.gather(*outstanding)
    ops += len(outstanding)
    await dispatcher.shutdown()
    return ops


async def python_session_round(target: str, workload: str, a: argparse.Namespace) -> Any:
    """One Session workload through the Python asyncio client: {ops, seconds, cpu}."""
    async with AsyncPurgatoryClient(target) as client:

        async def run(scale: float) -> int:
            if workload == "watchmany":
                return await python_watch_many(client, max(1, int(a.wm_ops * scale)))
            return await python_dispatch(client, a.duration * scale, a.window)

        await run(0.1)
        cpu0 = time.process_time()
        start = time.perf_counter()
        ops = await run(1.0)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu0
    return {"ops": ops, "seconds": seconds, "cpu_us_per_op": cpu * 1e6 / max(ops, 1)}


def node_round(target: str, workload: str, a: argparse.Namespace) -> Any:
    if workload == "longpoll":
        args = [str(NODE_SCRIPT), str(a.concurrency), str(a.duration), str(a.warmup)]
        cmd = ["node", args[0], target, *args[1:]]
    elif workload == "watchmany":
        cmd = ["node", str(NODE_SESSION), target, "watchmany", str(a.wm_ops)]
    else:
        cmd = ["node", str(NODE_SESSION), target, "dispatcher", str(a.duration), str(a.window)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_one(target: str, who: str, workload: str, a: argparse.Namespace) -> Any:
    if who == "node":
        res = node_round(target, workload, a)
    elif workload == "longpoll":
        res = asyncio.run(python_round(target, a))
    else:
        res = asyncio.run(python_session_round(target, workload, a))
    count = res["pairs"] if workload == "longpoll" else res["ops"]
    res["rate"] = count / res["seconds"]
    return res


def _rate(workload: str) -> Callable[[dict[str, Any]], float]:
    """A client's rate in ``workload``, from its round's results."""
    return lambda results: float(results[workload]["rate"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=32, help="pairs in flight")
    parser.add_argument("--wm-ops", type=int, default=5000, help="watchMany operations")
    parser.add_argument("--window", type=int, default=2000, help="dispatcher signals outstanding")
    parser.add_argument("--json", help="write the raw numbers here")
    a = parser.parse_args()
    context = run_context()
    rounds: Rounds[dict[str, Any]] = Rounds(CLIENTS, a.rounds, progress=False)
    with (
        tempfile.TemporaryDirectory(prefix="node-client-bench-") as tmp,
        bench_server(Path(tmp), "purgatory") as server,
    ):
        target = server.address
        for r, order in enumerate(rounds):
            got: dict[str, dict[str, Any]] = {who: {} for who in order}
            for workload in WORKLOADS:
                for who in order:
                    res = run_one(target, who, workload, a)
                    got[who][workload] = res
                    unit = "pairs/s" if workload == "longpoll" else "ops/s"
                    print(
                        f"round {r + 1}: {workload}: {who}: {res['rate']:,.0f} {unit}",
                        file=sys.stderr,
                    )
            for who in order:
                rounds.record(who, got[who])
    results = {w: {who: [r[who][w] for r in rounds.results] for who in CLIENTS} for w in WORKLOADS}
    ratios = {w: rounds.ratios("node", "python", _rate(w)) for w in WORKLOADS}
    longpoll = results["longpoll"]
    rows = []
    for who, label in (
        ("python", "Python AsyncPurgatoryClient"),
        ("node", "Node.js PurgatoryClient"),
    ):
        runs = longpoll[who]
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
        "\nNode/Python pairs/s: median of per-round ratios "
        f"{statistics.median(ratios['longpoll']):.2f}x "
        f"(rounds: {', '.join(f'{x:.2f}' for x in ratios['longpoll'])})"
    )
    session_rows = []
    for workload, what in (
        ("watchmany", f"watchMany, {a.wm_ops} ops"),
        ("dispatcher", f"dispatcher, window {a.window}"),
    ):
        for who, label in (("python", "Python"), ("node", "Node.js")):
            runs = results[workload][who]
            session_rows.append(
                [
                    what,
                    label,
                    statistics.median(x["rate"] for x in runs),
                    min(x["rate"] for x in runs),
                    max(x["rate"] for x in runs),
                    statistics.median(x["cpu_us_per_op"] for x in runs),
                ]
            )
    print()
    print(
        markdown_table(
            ["workload", "client", "ops/s (median)", "min", "max", "client CPU µs/op"],
            session_rows,
        )
    )
    for workload, label in (("watchmany", "watchMany"), ("dispatcher", "dispatcher")):
        print(
            f"Node/Python {label} ops/s: median of per-round ratios "
            f"{statistics.median(ratios[workload]):.2f}x "
            f"(rounds: {', '.join(f'{x:.2f}' for x in ratios[workload])})"
        )
    print(f"load average at start: {context['loadavg_1_5_15']}")
    print(rounds.load_report())
    payload = {
        "context": context,
        "args": vars(a),
        "results": results,
        "ratios": ratios,
        "loads_1min": rounds.loads,
    }
    out = write_json("node_client_bench", payload, a.json)
    print(f"raw numbers: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
