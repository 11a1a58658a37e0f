"""Thousands of purgatories on one server: threads, idle CPU, memory, a probe's latency.

One server process (``max_purgatories`` raised) and a probe (a separate process, the
abuse bench's: a long-poll watch + the signal that completes it every 20 ms on its own
connection) measure, in one run:

1. ``idle``: the probe against the server with only ``default``: the reference;
2. ``create in memory``: ``--memory`` in-memory purgatories created (``--concurrency``
   CreatePurgatory calls in flight) while the probe runs;
3. ``idle with them``: the probe again, nothing else happening; meanwhile the server's
   threads (``/proc``) and its CPU over the phase; before it, RSS per purgatory (RSS
   after the creates less RSS before, over their number) and the quiet CPU (``--quiet``
   seconds with not even the probe running; also measured before the creates);
4. ``create durable``: ``--durable`` durable purgatories created while the probe runs
   (``fsync = always``);
5. ``restart``: the server stopped (SIGTERM) and started again on the same data
   directory: seconds from spawn to serving, with the durable purgatories recovered.

Reported: the probe's p50/p99 per phase and their ratio to the idle one (same run),
threads, CPU, RSS per purgatory, creation rates, restart seconds. Raw numbers as JSON
(``--json``). ``--server-src DIR`` runs the server of another source tree (a before).

    python -m bench.many_purgatories_bench [--memory 10000] [--durable 1000] [--duration 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import (
    OWN_CONNECTION,
    markdown_table,
    percentile,
    run_context,
    tree_pythonpath,
    write_json,
)
from harness import ServerProcess
from harness.server import cpu_seconds

Stats = dict[str, Any]

CONFIG = """
[limits]
max_purgatories = {max_purgatories}
"""


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


async def _quiet_cpu(pid: int, seconds: float) -> float:
    """The server's CPU (cores) over ``seconds`` with nothing at all running."""
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)


def _start_probe(address: str, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "bench.abuse_bench", "--probe", address]
    argv += ["--duration", str(seconds), "--json", str(out)]
    return subprocess.Popen(argv)


async def _create(stub: Any, names: list[str], durable: bool, concurrency: int) -> Stats:
    """Create ``names``; seconds taken, failures by code, slowest create (ms)."""
    queue = list(reversed(names))
    failures: dict[str, int] = {}
    slowest = [0.0]
    config = pb.PurgatoryConfig(durable=durable)

    async def worker() -> None:
        while queue:
            name = queue.pop()
            began = time.monotonic()
            try:
                await stub.CreatePurgatory(
                    pb.CreatePurgatoryRequest(name=name, config=config), timeout=60
                )
            except grpc.aio.AioRpcError as exc:
                failures[exc.code().name] = failures.get(exc.code().name, 0) + 1
            slowest[0] = max(slowest[0], (time.monotonic() - began) * 1000)

    began = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    took = time.monotonic() - began
    return {
        "seconds": took,
        "per_s": len(names) / took,
        "failures": failures,
        "slowest_ms": slowest[0],
    }


async def _phase(
    name: str, server: ServerProcess, args: argparse.Namespace, root: Path, work: Any = None
) -> Stats:
    """The probe for ``--duration`` s beside ``work`` (a coroutine), CPU and threads."""
    out = root / f"probe-{name.replace(' ', '-')}.json"
    pid = server.pid
    probe = _start_probe(server.address, args.duration, out)
    await asyncio.sleep(0.3)  # the probe's interpreter starts
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    result = await work if work is not None else None
    await asyncio.to_thread(probe.wait, args.duration + 120)
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
    probed = json.loads(out.read_text())
    lat = sorted(probed["latencies_ms"])
    return {
        "phase": name,
        "probe_pairs": len(lat),
        "probe_failures": probed["failures"],
        "probe_p50_ms": percentile(lat, 0.5),
        "probe_p99_ms": percentile(lat, 0.99),
        "cpu_cores": cpu,
        "threads": _threads(pid),
        "rss_mib": server.rss_bytes() / 2**20,
        "work": result,
    }


async def run(args: argparse.Namespace) -> Stats:
    env = {"PYTHONPATH": tree_pythonpath(args.server_src)} if args.server_src else None
    with tempfile.TemporaryDirectory(prefix="many-purgatories-") as tmp:
        root = Path(tmp)
        config = CONFIG.format(max_purgatories=args.memory + args.durable + 16)
        own = ["--log-level", "WARNING", "--data-dir", str(root / "data")]
        server = ServerProcess(
            root,
            [*own, "--purgatory", "default"],
            label="many",
            env=env,
            config=config,
            start_timeout_s=600,
        )
        server.start().wait_port()
        phases: list[Stats] = []
        try:
            async with grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as ch:
                stub: Any = pb_grpc.PurgatoryServiceStub(ch)  # type: ignore[no-untyped-call]
                quiet_before = await _quiet_cpu(server.pid, args.quiet)
                phases.append(await _phase("idle", server, args, root))
                rss_before = server.rss_bytes()
                names = [f"mem-{i}" for i in range(args.memory)]
                create = _create(stub, names, False, args.concurrency)
                phases.append(await _phase("create in memory", server, args, root, create))
                await asyncio.sleep(2.0)  # settle
                rss_after = server.rss_bytes()
                quiet_after = await _quiet_cpu(server.pid, args.quiet)
                phases.append(await _phase("idle with them", server, args, root))
                durable = [f"dur-{i}" for i in range(args.durable)]
                create = _create(stub, durable, True, args.concurrency)
                phases.append(await _phase("create durable", server, args, root, create))
            server.stop()
            began = time.monotonic()
            server.start().wait_port()
            restart_s = time.monotonic() - began
            async with grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as ch:
                stub = pb_grpc.PurgatoryServiceStub(ch)  # type: ignore[no-untyped-call]
                listed = await stub.ListPurgatories(pb.ListPurgatoriesRequest())
            recovered = sum(1 for p in listed.purgatories if p.name.startswith("dur-"))
        finally:
            server.stop()
    return {
        "context": run_context(),
        "args": vars(args),
        "phases": phases,
        "rss_per_memory_purgatory_kib": (rss_after - rss_before) / max(1, args.memory) / 1024,
        "quiet_cpu_before": quiet_before,
        "quiet_cpu_after": quiet_after,
        "restart_s": restart_s,
        "recovered_durable": recovered,
    }


def _report(result: Stats) -> str:
    phases = result["phases"]
    idle = phases[0]["probe_p99_ms"]
    rows = [
        (
            p["phase"],
            p["probe_pairs"],
            p["probe_failures"],
            round(p["probe_p50_ms"], 1),
            round(p["probe_p99_ms"], 1),
            f"{p['probe_p99_ms'] / idle:.2f}x" if idle else "-",
            round(100 * p["cpu_cores"], 1),
            p["threads"],
            round(p["rss_mib"], 1),
            ""
            if p["work"] is None
            else f"{p['work']['per_s']:.0f}/s, slowest "
            f"{p['work']['slowest_ms']:.0f} ms, failed {p['work']['failures'] or 0}",
        )
        for p in phases
    ]
    headers = [
        *("phase", "pairs", "failed", "p50 ms", "p99 ms", "p99 / idle"),
        *("CPU %", "threads", "RSS MiB", "creates"),
    ]
    return (
        markdown_table(headers, rows)
        + f"\n\nquiet server CPU (nothing running, {result['args']['quiet']:g} s): "
        f"{100 * result['quiet_cpu_before']:.2f}% of a core with only default, "
        f"{100 * result['quiet_cpu_after']:.2f}% with the in-memory purgatories"
        + f"\nRSS per idle in-memory purgatory: {result['rss_per_memory_purgatory_kib']:.1f}"
        f" KiB; restart with {result['recovered_durable']} durable purgatories:"
        f" {result['restart_s']:.2f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", type=int, default=10_000, help="in-memory purgatories")
    parser.add_argument("--durable", type=int, default=1_000, help="durable purgatories")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per idle phase")
    parser.add_argument("--quiet", type=float, default=3.0, help="seconds of quiet CPU")
    parser.add_argument("--concurrency", type=int, default=16, help="creates in flight")
    parser.add_argument("--server-src", help="run the server of this source tree instead")
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    print(_report(result))
    write_json("many_purgatories", result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
