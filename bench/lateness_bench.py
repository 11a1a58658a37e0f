"""End-to-end expiry lateness of long-polls, measured at the client, stage by stage.

``--in-flight`` (20) long-polls ``TryCompleteElseWatch(wait=true, timeout_ms=--timeout-ms)``
(100 ms) on fresh keys nobody signals are kept in flight against a real server process,
their first sends spread over one timeout as independent clients would send them
(``--burst`` sends them at once, so they also expire and return as one burst). Each one's
**lateness** is its round trip minus the timeout, read on the client's monotonic clock.
Every server runs twice per round:

- **idle**: only the long-polls;
- **loaded**: while a separate load process (``--load``) drives the same server with the
  batch benchmark's shape (``bench.service_bench``'s batch form: 4 workers, each a
  ``BatchTryCompleteElseWatch(wait=true)`` of 100 operations answered by one
  ``BatchCheckAndComplete``, over 2 connections). Its pairs/s is reported too, so a
  change that buys lateness with throughput shows.

Each server runs under ``bench._lateness_server``, which timestamps every expiry on the
server: ``arm`` (the timer armed, relative to the client's send: the request's way in),
then ``reaper`` wake-up, timer ``task`` start and event ``loop`` pick-up of the ended
operation (these three relative to the timer entry's due time; see that module). What
is left between ``loop`` and the client's figure is the service's publication, the
handler's resumption, grpc's send and the client's own pick-up.

Servers, all up for the whole run, rounds interleaved (``--rounds``): this tree; with
``--compare-src DIR`` another source tree (e.g. ``git archive main | tar -x -C DIR``; build
its engine there with ``setup.py build_ext --inplace`` to compare compiled with compiled),
for before/after in one run; with ``--switch-interval-ms MS`` (repeatable) this tree with
``sys.setswitchinterval`` forced to MS; and with ``--bare`` the floor of any grpc.aio
long-poll server: ``bench.service_bare --expire``, which parks each long-poll on a Future
and answers it from one ``loop.call_later`` (no engine, no other thread; no stage
timestamps either). What the bare server's figures show under the same load bounds what
any server on grpc.aio's one event loop can reach on the same machine.

The ``reaper`` stage needs an interpreted ``DelayQueue``: against the compiled engine
(mypyc's classes cannot be patched) it reads nan; the ``task`` stage, from the same due
time to the task starting on the reaper, covers that wake-up too.

    python -m bench.lateness_bench [--rounds 4] [--duration 4] [--compare-src DIR]

Prints a table per phase (p50/p99/max at the client and per stage) and the issue's
targets: p99 <= 5 ms idle, <= 10 ms loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import (
    OWN_CONNECTION,
    bench_server,
    markdown_table,
    percentile,
    run_context,
    tree_pythonpath,
    write_json,
)
from bench.service_bare import bare_server
from harness import ServerProcess, serving

TARGET_IDLE_MS = 5.0
TARGET_LOADED_MS = 10.0
STAGES = ("arm", "reaper", "task", "loop")


@dataclass
class Server:
    """A server under test: its process, and where it writes its stage records ("": the
    bare server, which records none)."""

    label: str
    process: ServerProcess
    trace: str = ""

    @property
    def bare(self) -> bool:
        return not self.trace

    @property
    def port(self) -> int:
        return self.process.port


def traced(root: Path, label: str, slug: str, extra: list[str], env: dict[str, str]) -> Server:
    """A purgatory server under ``bench._lateness_server`` (stage records to a file)."""
    trace = str(root / f"{slug}.json")
    command = [sys.executable, "-m", "bench._lateness_server", "--trace", trace, *extra, "--"]
    return Server(label, bench_server(root, slug, env=env, command=command), trace)


@dataclass
class Phase:
    server: str
    loaded: bool
    start_ns: int = 0
    end_ns: int = 0
    client_ms: list[float] = field(default_factory=list)
    rtt_ms: list[float] = field(default_factory=list)
    not_expired: int = 0
    load_pairs_s: float = float("nan")


async def long_polls(port: int, phase: Phase, a: argparse.Namespace) -> None:
    """``--in-flight`` loops, each one long-poll at a time, for ``--duration`` seconds."""
    timeout_ns = a.timeout_ms * 1_000_000
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", OWN_CONNECTION) as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)
        end = time.monotonic() + a.duration

        async def one(w: int) -> None:
            if a.stagger:
                # Independent clients: spread the first sends over one timeout, so the
                # long-polls do not all expire in one tick and come back as one burst.
                await asyncio.sleep(w * a.timeout_ms / 1000.0 / a.in_flight)
            while time.monotonic() < end:
                t0 = time.monotonic_ns()
                req = pb.TryCompleteElseWatchRequest(
                    purgatory="default",
                    keys=[f"late-{w}-{t0}-{a.timeout_ms}"],  # unique; tells the server t0
                    timeout_ms=a.timeout_ms,
                    wait=True,
                )
                resp = await stub.TryCompleteElseWatch(req)
                t1 = time.monotonic_ns()
                if resp.state != pb.OPERATION_STATE_EXPIRED:
                    phase.not_expired += 1
                    continue
                phase.client_ms.append((t1 - t0 - timeout_ns) / 1e6)

        async def probe() -> None:
            # The transport's floor under the same conditions: one cheap unary RPC (a
            # signal to a key nobody watches) every 10 ms, its round trip.
            req = pb.CheckAndCompleteRequest(purgatory="default", key="late-probe")
            while time.monotonic() < end:
                t0 = time.monotonic_ns()
                await stub.CheckAndComplete(req)
                phase.rtt_ms.append((time.monotonic_ns() - t0) / 1e6)
                await asyncio.sleep(0.01)

        phase.start_ns = time.monotonic_ns()
        await asyncio.gather(probe(), *(one(w) for w in range(a.in_flight)))
        phase.end_ns = time.monotonic_ns()


async def run_phase(server: Server, loaded: bool, a: argparse.Namespace) -> Phase:
    phase = Phase(server.label, loaded)
    if not loaded:
        await long_polls(server.port, phase, a)
        return phase
    seconds = a.load_warmup + a.duration + 0.5
    cmd = [sys.executable, "-m", "bench.lateness_bench", "--load", f"127.0.0.1:{server.port}"]
    cmd += ["--load-seconds", str(seconds)]
    load = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE)
    await asyncio.sleep(a.load_warmup)
    await long_polls(server.port, phase, a)
    out, _ = await load.communicate()
    with contextlib.suppress(ValueError, IndexError):
        phase.load_pairs_s = float(json.loads(out.decode().strip().splitlines()[-1])["pairs_s"])
    return phase


async def main_async(servers: list[Server], a: argparse.Namespace) -> list[Phase]:
    phases: list[Phase] = []
    loads = [False] if a.no_load else [False, True]
    for r in range(a.rounds):
        # Each round starts with another server, so none always follows a loaded phase
        # (whose server may still be finishing that load's calls).
        order = servers[r % len(servers) :] + servers[: r % len(servers)]
        for loaded in loads:
            for s in order:
                phases.append(await run_phase(s, loaded, a))
                if loaded:
                    await asyncio.sleep(a.settle)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    return phases


def stage_samples(servers: list[Server], phases: list[Phase]) -> dict[tuple[str, bool], Any]:
    """Server-side stage records, assigned to the phase whose time window holds them."""
    out: dict[tuple[str, bool], dict[str, list[float]]] = {}
    for s in servers:
        if s.bare:
            continue  # no stage timestamps
        try:
            rows = json.loads(Path(s.trace).read_text())
        except (OSError, ValueError):
            rows = []
        windows = [p for p in phases if p.server == s.label]
        for t, stage, late in rows:
            for p in windows:
                if p.start_ns <= t <= p.end_ns:
                    out.setdefault((s.label, p.loaded), {}).setdefault(stage, []).append(late)
                    break
    return out


def summarise(servers: list[Server], phases: list[Phase], a: argparse.Namespace) -> dict[str, Any]:
    stages = stage_samples(servers, phases)
    rows: list[list[object]] = []
    result: dict[str, Any] = {}
    for loaded in (False, True):
        for s in servers:
            ps = [p for p in phases if p.server == s.label and p.loaded == loaded]
            if not ps:
                continue
            client = sorted(x for p in ps for x in p.client_ms)
            st = stages.get((s.label, loaded), {})
            rtt = sorted(x for p in ps for x in p.rtt_ms)
            entry: dict[str, Any] = {
                "n": len(client),
                "not_expired": sum(p.not_expired for p in ps),
                "client_p50_ms": percentile(client, 0.5),
                "client_p99_ms": percentile(client, 0.99),
                "client_max_ms": client[-1] if client else float("nan"),
                "rtt_p50_ms": percentile(rtt, 0.5),
                "rtt_p99_ms": percentile(rtt, 0.99),
                "load_pairs_s": [p.load_pairs_s for p in ps],
                "per_round_p99_ms": [percentile(sorted(p.client_ms), 0.99) for p in ps],
            }
            for name in STAGES:
                vals = sorted(st.get(name, []))
                entry[f"{name}_p50_ms"] = percentile(vals, 0.5)
                entry[f"{name}_p99_ms"] = percentile(vals, 0.99)
            result[f"{s.label} / {'loaded' if loaded else 'idle'}"] = entry
            loads = [x for x in entry["load_pairs_s"] if not math.isnan(x)]
            rows.append(
                [
                    s.label,
                    "loaded" if loaded else "idle",
                    entry["n"],
                    *(entry[f"{n}_{q}_ms"] for n in STAGES for q in ("p50", "p99")),
                    entry["client_p50_ms"],
                    entry["client_p99_ms"],
                    entry["client_max_ms"],
                    entry["rtt_p50_ms"],
                    entry["rtt_p99_ms"],
                    sum(loads) / len(loads) if loads else "-",
                ]
            )
    headers = ["server", "phase", "long-polls"]
    headers += [f"{n} {q}" for n in STAGES for q in ("p50", "p99")]
    headers += ["client p50", "client p99", "client max", "RPC rtt p50", "rtt p99"]
    headers += ["load pairs/s"]
    print("\nexpiry lateness in ms (stages on the server, then at the client):\n")
    print(markdown_table(headers, rows))
    print()
    for key, entry in result.items():
        target = TARGET_LOADED_MS if key.endswith("loaded") else TARGET_IDLE_MS
        ok = entry["client_p99_ms"] <= target
        rounds = ", ".join(f"{x:.1f}" for x in entry["per_round_p99_ms"])
        print(
            f"acceptance: {key}: client p99 {entry['client_p99_ms']:.2f} ms "
            f"(target <= {target:.0f} ms): {'met' if ok else 'NOT met'}; per round: {rounds}"
        )
    return result


def subjects(root: Path, a: argparse.Namespace) -> list[Server]:
    """This tree; at other switch intervals; another source tree; the bare server."""
    servers = [traced(root, "this tree", "this", [], {})]
    for i, ms in enumerate(a.switch_interval_ms):
        extra = ["--switch-interval-ms", str(ms)]
        servers.append(traced(root, f"this tree, switch {ms:g} ms", f"sw{i}", extra, {}))
    if a.compare_src:
        env = {"PYTHONPATH": tree_pythonpath(a.compare_src)}
        servers.append(traced(root, a.compare_label, "compare", [], env))
    if a.bare:
        bare = bare_server(root, "bare", expire=True)
        servers.append(Server("bare grpc.aio, asyncio timer", bare))
    return servers


def load_main(target: str, seconds: float) -> None:
    """The load process: the batch benchmark's shape for ``seconds``; prints its pairs/s."""
    from bench._service_report import Run
    from bench._service_unary import grpc_batched

    ns = argparse.Namespace(
        channels=2, batch_size=100, batch_workers=4, duration=seconds, warmup=0.0
    )
    run: Run = asyncio.run(grpc_batched("load", target, ns))
    print(json.dumps({"pairs_s": run.rate}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per phase")
    parser.add_argument("--in-flight", type=int, default=20, help="long-polls in flight")
    parser.add_argument("--timeout-ms", type=int, default=100, help="each long-poll's timeout")
    parser.add_argument("--load-warmup", type=float, default=1.5, help="load's head start (s)")
    parser.add_argument(
        "--burst",
        dest="stagger",
        action="store_false",
        help="start all long-polls at once (they then expire and return as one burst) "
        "instead of spreading their first sends over one timeout",
    )
    parser.add_argument(
        "--settle", type=float, default=1.0, help="pause after each loaded phase (s)"
    )
    parser.add_argument("--no-load", action="store_true", help="idle phases only")
    parser.add_argument("--compare-src", help="also run a server from this source tree")
    parser.add_argument("--compare-label", default="baseline", help="its name in the table")
    parser.add_argument(
        "--switch-interval-ms",
        type=float,
        action="append",
        default=[],
        help="also run this tree with sys.setswitchinterval forced to MS (repeatable)",
    )
    parser.add_argument(
        "--bare",
        action="store_true",
        help="also run bench.service_bare --expire: grpc.aio's floor for a long-poll",
    )
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    parser.add_argument("--load", metavar="TARGET", help=argparse.SUPPRESS)
    parser.add_argument("--load-seconds", type=float, default=5.0, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.load:
        load_main(a.load, a.load_seconds)
        return
    context = run_context()
    print(f"lateness bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="lateness-") as tmp:
        servers = subjects(Path(tmp), a)
        with serving(*(s.process for s in servers)):
            phases = asyncio.run(main_async(servers, a))
        # The trace files are written as the servers exit: read them before they go.
        result = summarise(servers, phases, a)
    payload = {"context": context, "args": vars(a), "results": result}
    print(f"\nraw numbers: {write_json('lateness_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
