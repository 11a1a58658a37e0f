"""The console under load: its pages' latency, and what an open console costs the load.

Three purgatory server processes run side by side for the whole run (the load generator
never shares their GIL):

- **off**: the default server, no ``--console-listen`` (the console's code is not even
  imported);
- **console**: ``--console-listen 127.0.0.1:0``, measured twice each round: **closed**
  (nobody has it open: only its once-a-second sampler runs) and **open**: a browser
  stand-in (``bench._console_poller``, a process of its own) keeps the live outcomes
  page's event stream open (a Subscribe stream relaying outcomes as server-sent events:
  every one up to the page's cap, a sample above it) and fetches the overview and the
  ``default`` purgatory's page every ``--poll-interval`` seconds with its session
  cookie, timing each fetch;
- **spare**: a third console server that carries no load, for the control subject
  **elsewhere**: the console server under the load, closed, while the same browser
  stand-in polls the spare. On a machine of few cores the stand-in is a third busy
  process beside the load generator and the loaded server (a browser would run on the
  operator's own machine); open against elsewhere keeps what the stand-in costs the
  machine out of what the open console costs the server.

Each subject runs the service benchmark's batch form (``bench._service_unary``; or its
stream form, ``--form stream``, ``bench._service_stream``) for ``--duration`` seconds;
rounds interleave the subjects, their order rotating (``bench._rounds``). Reported: the
load's pairs/s per subject (median over rounds) and the median of per-round ratios to
**closed** and to **elsewhere** (the acceptance: open within 5% of elsewhere), the
server's CPU per pair, and the pages' latency p50/p99 under the load (the acceptance:
p99 within 200 ms). Tokens are off (the load drivers send none); the console's session
cookie goes with every page as a browser's would.

    python -m bench.console_bench [--rounds 5] [--duration 3] [--form batch|stream]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench._common import bench_server, markdown_table, percentile, run_context, write_json
from bench._console_poller import poll
from bench._rounds import Rounds
from bench._service_report import Run
from bench._service_stream import grpc_stream
from bench._service_unary import grpc_batched
from harness import ServerProcess, serving

SUBJECTS = ("off", "closed", "elsewhere", "open")
PAGES = ["/", "/p/default"]
P99_LIMIT_MS = 200.0
RATIO_LIMIT = 0.95

Figures = dict[str, Any]


class Poller:
    """The browser stand-in's process for one measurement (see module docstring)."""

    def __init__(self, port: int, interval_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._recv, send = ctx.Pipe(duplex=False)
        kwargs = {
            "pages": PAGES,
            "interval_s": interval_s,
            "ready": self._ready,
            "stop": self._stop,
            "out": send,
        }
        self._process = ctx.Process(
            target=poll, args=(port, "default"), kwargs=kwargs, name="console-poller"
        )

    def start(self) -> None:
        self._process.start()
        if not self._ready.wait(60):
            self._process.kill()
            raise RuntimeError("the console poller did not get ready within 60 s")

    def finish(self) -> dict[str, Any]:
        self._stop.set()
        if not self._recv.poll(60):
            self._process.kill()
            raise RuntimeError("the console poller sent no figures within 60 s")
        result: dict[str, Any] = json.loads(self._recv.recv())
        self._process.join(10)
        return result


async def _load(label: str, target: str, a: argparse.Namespace) -> Run:
    if a.form == "stream":
        return await grpc_stream(label, target, a)
    return await grpc_batched(label, target, a)


async def measure(
    servers: dict[str, ServerProcess], ports: dict[str, int], label: str, a: argparse.Namespace
) -> Figures:
    server = servers["off" if label == "off" else "console"]
    polled_server = {"open": "console", "elsewhere": "spare"}.get(label)
    poller = Poller(ports[polled_server], a.poll_interval) if polled_server else None
    if poller is not None:
        poller.start()
    before = server.cpu_seconds()
    try:
        run = await _load(label, server.address, a)
    finally:
        polled = poller.finish() if poller is not None else None
    # The warm-up's pairs are not counted; its CPU is, in proportion.
    used = (server.cpu_seconds() - before) * a.duration / (a.duration + a.warmup)
    figures: Figures = {
        "rate": run.rate,
        "cpu_us_per_pair": used / run.pairs * 1e6 if run.pairs else 0.0,
        "pair_p99_ms": percentile(sorted(run.latencies), 0.99) * 1e3,
    }
    if polled is not None:
        figures.update(polled)
    return figures


async def main_async(a: argparse.Namespace, root: Path) -> Rounds[Figures]:
    servers = {
        "off": bench_server(root, "off", "--log-level", "INFO"),
        **{
            name: bench_server(root, name, "--log-level", "INFO", "--console-listen", "127.0.0.1:0")
            for name in ("console", "spare")
        },
    }
    rounds: Rounds[Figures] = Rounds(SUBJECTS, a.rounds)
    with contextlib.ExitStack() as stack:
        stack.enter_context(serving(*servers.values()))
        ports = {
            name: int(servers[name].wait_log(r"console: http://127\.0\.0\.1:(\d+)/")[1])
            for name in ("console", "spare")
        }
        await rounds.run_async(lambda label: measure(servers, ports, label, a))
    return rounds


def _rate(figures: Figures) -> float:
    return float(figures["rate"])


def _cpu(figures: Figures) -> float:
    return float(figures["cpu_us_per_pair"])


def report(rounds: Rounds[Figures], a: argparse.Namespace) -> dict[str, Any]:
    rows = []
    summary: dict[str, Any] = {}
    for label in SUBJECTS:
        rates = rounds.values(label, _rate)
        ratio = rounds.median_ratio(label, "closed", _rate)
        control = rounds.median_ratio(label, "elsewhere", _rate)
        cpu_ratio = rounds.median_ratio(label, "closed", _cpu)
        cpu_control = rounds.median_ratio(label, "elsewhere", _cpu)
        cpu = statistics.median(rounds.values(label, _cpu))
        rows.append(
            [
                label,
                round(statistics.median(rates)),
                round(min(rates)),
                round(max(rates)),
                _fmt(ratio),
                _fmt(control),
                round(cpu, 1),
                _fmt(cpu_ratio),
                _fmt(cpu_control),
            ]
        )
        summary[label] = {
            "median_rate": statistics.median(rates),
            "ratio": ratio,
            "ratio_to_elsewhere": control,
            "cpu": cpu,
            "cpu_ratio": cpu_ratio,
            "cpu_ratio_to_elsewhere": cpu_control,
        }
    print(f"\n{a.form} form load, {a.duration:g} s per subject per round, {a.rounds} rounds:\n")
    headers = [
        "console",
        "pairs/s (median)",
        "min",
        "max",
        "pairs/s to closed",
        "pairs/s to elsewhere",
        "server CPU µs/pair",
        "CPU to closed",
        "CPU to elsewhere",
    ]
    print(markdown_table(headers, rows))
    pages: dict[str, list[float]] = {path: [] for path in PAGES}
    events = reconnects = skipped = samplings = 0
    errors: list[str] = []
    refusals: list[str] = []
    jumps: list[str] = []
    for result in rounds.results:
        opened = result["open"]
        for path in PAGES:
            pages[path].extend(opened["pages"][path])
        events += opened["events"]
        reconnects += opened["reconnects"]
        skipped += opened["skipped"]
        samplings += opened["samplings"]
        jumps += opened["jumps"]
        refusals += opened["refusals"]
        errors += opened["errors"]
    rows = []
    every: list[float] = []
    for path, seconds in pages.items():
        lat = sorted(seconds)
        every += lat
        rows.append(
            [
                path,
                len(lat),
                percentile(lat, 0.5) * 1e3,
                percentile(lat, 0.99) * 1e3,
                (lat[-1] if lat else float("nan")) * 1e3,
            ]
        )
    every.sort()
    p99 = percentile(every, 0.99) * 1e3
    rows.append(
        [
            "every page",
            len(every),
            percentile(every, 0.5) * 1e3,
            p99,
            every[-1] * 1e3 if every else float("nan"),
        ]
    )
    print("\nconsole pages under the load (open):\n")
    print(markdown_table(["page", "fetches", "p50 ms", "p99 ms", "max ms"], rows))
    outcomes = sum(r["open"]["rate"] * a.duration for r in rounds.results)
    print(
        f"\nlive outcomes relayed to the open event stream: {events} of about "
        f"{outcomes:,.0f} published while measured, {skipped:,} announced as skipped by its "
        f"samples; switches to a sample: {samplings}; jumps to now: {len(jumps)}; "
        f"reconnects: {reconnects}"
    )
    if jumps:
        print(f"event stream jumps (first): {jumps[0]}")
    if refusals:
        print(f"event stream refusals (first): {refusals[0]}")
    if errors:
        print(f"page errors: {errors}")
    print(rounds.load_report())
    open_ratio = summary["open"]["ratio_to_elsewhere"]
    verdict = (
        "met"
        if open_ratio is not None and open_ratio >= RATIO_LIMIT and p99 <= P99_LIMIT_MS
        else "not met"
    )
    print(
        f"acceptance: page p99 {p99:.1f} ms (limit {P99_LIMIT_MS:g}), open/elsewhere pairs/s "
        f"{_fmt(open_ratio)} (limit {RATIO_LIMIT}; open/closed {_fmt(summary['open']['ratio'])}"
        f", the stand-in's own CPU included): {verdict}"
    )
    return {
        "context": run_context(),
        "args": vars(a),
        "summary": summary,
        "page_p99_ms": p99,
        "events_relayed": events,
        "events_skipped": skipped,
        "event_stream_samplings": samplings,
        "event_stream_jumps": jumps,
        "event_stream_reconnects": reconnects,
        "event_stream_refusals": refusals,
        "rounds": rounds.results,
        "loads_1min": rounds.loads,
    }


def _fmt(ratio: float | None) -> str:
    return f"{ratio:.3f}" if ratio is not None else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per subject per round")
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds before each")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--form", choices=["batch", "stream"], default="batch", help="the load")
    parser.add_argument("--channels", type=int, default=2, help="client connections")
    parser.add_argument("--batch-workers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--streams", type=int, default=4, help="Session streams (stream form)")
    parser.add_argument(
        "--poll-interval", type=float, default=0.1, help="seconds between the pages' rounds"
    )
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"console bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        rounds = asyncio.run(main_async(a, Path(tmp)))
    payload = report(rounds, a)
    print(f"\nraw numbers: {write_json('console_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
