"""Abuse patterns against one server while a well-behaved probe keeps working (issue 22).

One purgatory server process (``bench_server``) with small, explicit bounds (``CONFIG``)
runs, one after another, the abuse patterns of issue 22, each for ``--duration`` seconds
or until its work is done:

1. ``slow-subscribe``: ``--streams`` Subscribe streams that never read while big
   outcomes (``--payload`` bytes) are produced;
2. ``slow-session``: Sessions that never read, sending frames of watches with big
   payloads and ``timeout_ms=1`` (their outcomes pile up for the session);
3. ``signal-data``: many operations pending on one key, signalled with big ``data``;
4. ``keys``: operations on many distinct 256-character keys, no payload;
5. ``retained``: purgatories filling their retained window with big outcomes;
6. ``many-subscribers``: many non-reading Subscribe streams while outcomes are produced;
7. ``idle-connections``: raw TCP connections that never send a byte;
8. ``bulk``: 4 senders of back-to-back big batches (``--bulk-batch``); with
   ``--shed-lag-ms`` the server sheds them while its event loop runs late.

Meanwhile a probe (a separate process, ``--probe``, so the load generator's own event
loop does not delay it) sends a watch + signal pair every 20 ms on its own connection: a
long-poll ``TryCompleteElseWatch(wait=true)`` on a fresh key and the ``CheckAndComplete``
that completes it; its latency is the long-poll's round trip. Before the patterns the same
probe runs against the idle server: that is the reference, same server, same run. The
server's RSS is sampled every 20 ms. ``--server-src DIR`` runs the server of another
source tree (``git archive <commit> | tar -x -C DIR``, its engine compiled there) for
before/after runs; each run's ratios are against its own idle probe.

Reported per pattern: peak RSS over the RSS just before it, the probe's p50/p99 and their
ratio to the idle probe's, the probe's failed pairs, and what the pattern itself saw
(e.g. streams cut with RESOURCE_EXHAUSTED). Raw numbers as JSON (``--json``).

    python -m bench.abuse_bench [--duration 5] [--streams 4] [--payload 16384] ...
    python -m bench.abuse_bench --server-src /tmp/before --patterns 4 5 6
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._abuse_patterns import PATTERNS, Load
from bench._common import (
    OWN_CONNECTION,
    bench_server,
    markdown_table,
    percentile,
    run_context,
    tree_pythonpath,
    write_json,
)
from harness import ServerProcess

PROBE_INTERVAL_S = 0.020
# The bounds the server runs with: the budget each pattern is measured against.
CONFIG = """
shed_lag_ms = {shed_lag_ms}
[limits]
memory_budget_bytes = {budget_bytes}
subscriber_buffer_bytes = {buffer_bytes}
session_buffer_bytes = {buffer_bytes}
max_subscribers = 2048
max_subscribe_streams = 4096
max_subscribe_streams_per_connection = 2048
[defaults]
max_pending = 1000000
retained_events = 1000
dedup_max_bytes = 1048576
"""

Stats = dict[str, Any]


# ----------------------------------------------------------------------------- probe
async def probe(address: str, seconds: float) -> Stats:
    """Pairs every 20 ms for ``seconds``: their latencies (ms) and failures."""
    async with grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as channel:
        stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        latencies: list[float] = []
        failures = 0
        stop = time.monotonic() + seconds
        n = 0
        while time.monotonic() < stop:
            began = time.monotonic()
            key = f"probe-{n}-{began}"
            n += 1
            try:
                await asyncio.wait_for(_pair(stub, key), 10)
                latencies.append((time.monotonic() - began) * 1000)
            except (grpc.aio.AioRpcError, TimeoutError):
                failures += 1
            await asyncio.sleep(max(0.0, PROBE_INTERVAL_S - (time.monotonic() - began)))
    return {"latencies_ms": latencies, "failures": failures}


async def _pair(stub: Any, key: str) -> None:
    watch = asyncio.ensure_future(
        stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory="default", keys=[key], timeout_ms=30_000, wait=True
            )
        )
    )
    try:
        while not watch.done():  # signal until the watch is registered and completes
            request = pb.CheckAndCompleteRequest(purgatory="default", key=key)
            await stub.CheckAndComplete(request)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(watch), 0.002)
        response = await watch
    finally:
        watch.cancel()
    assert response.state == pb.OPERATION_STATE_COMPLETED, response


def _start_probe(address: str, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "bench.abuse_bench", "--probe", address]
    argv += ["--duration", str(seconds), "--json", str(out)]
    return subprocess.Popen(argv)


# ----------------------------------------------------------------------------- the run
async def _sample_rss(server: ServerProcess, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            peak[0] = max(peak[0], server.rss_bytes())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.02)


async def _phase(
    name: str, server: ServerProcess, args: argparse.Namespace, root: Path, stub: Any
) -> Stats:
    """One pattern (or the idle reference) with the probe running beside it."""
    out = root / f"probe-{name.split(maxsplit=1)[0]}.json"
    baseline = server.rss_bytes()
    peak = [baseline]
    done = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(server, peak, done))
    probe_proc = _start_probe(server.address, args.duration, out)
    await asyncio.sleep(0.3)  # the probe's interpreter starts
    load = Load(server, stub, args)
    began = time.monotonic()
    pattern = PATTERNS.get(name)
    if pattern is not None:
        try:
            await pattern(load, began + args.duration)
        except grpc.aio.AioRpcError as exc:
            load.count(f"pattern error {exc.code().name}")
    await asyncio.to_thread(probe_proc.wait, args.duration + 60)
    done.set()
    await sampler
    probed = json.loads(out.read_text())
    lat = sorted(probed["latencies_ms"])
    await asyncio.sleep(1.0)  # let the server settle before the next baseline
    return {
        "pattern": name,
        "rss_baseline_mib": baseline / 2**20,
        "rss_peak_over_baseline_mib": (peak[0] - baseline) / 2**20,
        "probe_pairs": len(lat),
        "probe_failures": probed["failures"],
        "probe_p50_ms": percentile(lat, 0.5),
        "probe_p99_ms": percentile(lat, 0.99),
        "seen": load.seen,
        "probe_latencies_in_order_ms": probed["latencies_ms"],
    }


async def run(args: argparse.Namespace) -> Stats:
    root = Path(tempfile.mkdtemp(prefix="abuse-bench-"))
    config_path = root / "abuse.toml"
    config = CONFIG.format(
        buffer_bytes=args.buffer_bytes,
        shed_lag_ms=args.shed_lag_ms,
        budget_bytes=args.budget_bytes,
    )
    config_path.write_text(config)
    env = {"PYTHONPATH": tree_pythonpath(args.server_src)} if args.server_src else None
    server = bench_server(root, "abuse", "--config", str(config_path), env=env)
    selected = [n for n in PATTERNS if not args.patterns or n.split()[0] in args.patterns]
    phases: list[Stats] = []
    with server:
        async with grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as ch:
            stub: Any = pb_grpc.PurgatoryServiceStub(ch)  # type: ignore[no-untyped-call]
            phases.append(await _phase("idle", server, args, root, stub))
            for name in selected:
                phases.append(await _phase(name, server, args, root, stub))
    shutil.rmtree(root, ignore_errors=True)
    return {"context": run_context(), "args": vars(args), "phases": phases}


def report(result: Stats) -> str:
    phases = result["phases"]
    idle = phases[0]
    rows = []
    for p in phases:
        rows.append(
            [
                p["pattern"],
                round(p["rss_peak_over_baseline_mib"], 1),
                p["probe_pairs"],
                p["probe_failures"],
                round(p["probe_p50_ms"], 2),
                round(p["probe_p99_ms"], 2),
                round(p["probe_p50_ms"] / idle["probe_p50_ms"], 2),
                round(p["probe_p99_ms"] / idle["probe_p99_ms"], 2),
                ", ".join(f"{k}: {v}" for k, v in sorted(p["seen"].items())) or "-",
            ]
        )
    headers = [
        "pattern",
        "peak RSS over baseline MiB",
        "probe pairs",
        "failed",
        "p50 ms",
        "p99 ms",
        "p50 / idle",
        "p99 / idle",
        "what the pattern saw",
    ]
    budget = result["args"]["buffer_bytes"] / 2**20
    shed = result["args"]["shed_lag_ms"]
    src = result["args"].get("server_src")
    server = f"; server from {src}" if src else ""
    return (
        f"abuse patterns, probe pair every 20 ms (subscriber_buffer_bytes and "
        f"session_buffer_bytes {budget:g} MiB, "
        f"shed_lag_ms {shed}{server})\n" + markdown_table(headers, rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per pattern")
    parser.add_argument("--patterns", nargs="*", default=[], help="numbers, e.g. 1 6 7")
    parser.add_argument("--streams", type=int, default=4, help="pattern 1's non-readers")
    parser.add_argument("--payload", type=int, default=16 * 1024, help="patterns 1, 2 bytes")
    parser.add_argument("--sessions", type=int, default=1, help="pattern 2's Sessions")
    parser.add_argument("--subscribers", type=int, default=200, help="pattern 6's streams")
    parser.add_argument("--signal-ops", type=int, default=2000, help="pattern 3's")
    parser.add_argument("--key-ops", type=int, default=2000, help="pattern 4's operations")
    parser.add_argument("--purgatories", type=int, default=8, help="pattern 5's")
    parser.add_argument("--connections", type=int, default=2000, help="pattern 7's")
    parser.add_argument("--bulk-batch", type=int, default=5000, help="pattern 8's batch")
    parser.add_argument(
        "--shed-lag-ms", type=int, default=0, help="the server's shed_lag_ms (0: off)"
    )
    parser.add_argument(
        "--buffer-bytes", type=int, default=4 << 20, help="per Subscribe and Session stream"
    )
    parser.add_argument(
        "--budget-bytes",
        type=int,
        default=0,
        help="the server's memory_budget_bytes (0: its default, a share of the machine's)",
    )
    parser.add_argument("--server-src", help="run the server of this source tree instead")
    parser.add_argument("--probe", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    if args.probe:
        stats = asyncio.run(probe(args.probe, args.duration))
        Path(args.json).write_text(json.dumps(stats))
        return 0
    result = asyncio.run(run(args))
    print(report(result))
    out = write_json("abuse_bench", result, args.json)
    print(f"raw numbers: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
