"""Observability's cost: the service benchmark's pairs/s with metrics and tracing on vs off.

Three purgatory server processes run side by side for the whole run, each its own
process (the load generator never shares their GIL):

- **off**: the default server (no ``--metrics-listen``, no tracing);
- **metrics**: ``--metrics-listen`` (Prometheus endpoint), scraped every
  ``--scrape-interval`` seconds (default 5) by this process during the run, so the
  collection's cost (about 10 ms of CPU per scrape) is charged too; Prometheus is
  usually configured to scrape every 15 s to 1 min;
- **metrics + tracing**: the same plus ``--tracing``: a server span per RPC, always
  sampled (the SDK's default sampler), its traceparent stored with every operation
  registered. No span exporter is configured, so the cost measured is creating, filling
  and ending spans, not shipping them.

Each round runs the service benchmark's two forms (``bench.service_bench``'s unbatched
``TryCompleteElseWatch(wait=true)`` + ``CheckAndComplete`` pairs and its batch form) on
each server in turn; rounds interleave so that the shared machine's drift hits every
mode alike, and the order of the modes rotates from round to round. Reported: per mode
and form the median pairs/s over the rounds, and the median of the per-round ratios to
"off" in the same round.

    python -m bench.observability_bench [--rounds 5] [--duration 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench._common import bench_server, markdown_table, run_context, write_json
from bench._observability_inprocess import inprocess
from bench._rounds import Rounds
from bench._service_unary import grpc_batched, grpc_unbatched
from harness import ServerProcess, serving

MODES = ("off", "metrics", "metrics + tracing")
FORMS = ("unbatched", "batch form")


def mode_server(root: Path, mode: str) -> ServerProcess:
    """The server of ``mode``; the metrics endpoint on a port of its choosing, which it
    logs at INFO (a start-up line; nothing per request is logged at INFO)."""
    args = []
    if mode != "off":
        args += ["--metrics-listen", "127.0.0.1:0", "--log-level", "INFO"]
    if mode == "metrics + tracing":
        args += ["--tracing"]
    return bench_server(root, mode.replace(" + ", "-"), *args)


@contextlib.contextmanager
def scraper(urls: list[str], interval: float) -> Iterator[dict[str, int]]:
    """Scrape every URL each ``interval`` seconds on a thread until the block ends."""
    stop = threading.Event()
    counts = {"scrapes": 0, "bytes": 0}

    def loop() -> None:
        while not stop.wait(interval):
            for url in urls:
                with urllib.request.urlopen(url, timeout=10) as response:
                    counts["bytes"] += len(response.read())
                counts["scrapes"] += 1

    thread = threading.Thread(target=loop, name="scraper", daemon=True)
    thread.start()
    try:
        yield counts
    finally:
        stop.set()
        thread.join(15)


Figures = dict[str, tuple[float, float]]  # per form: pairs/s, server CPU µs per pair


async def measure(server: ServerProcess, mode: str, a: argparse.Namespace) -> Figures:
    """Both forms on ``mode``'s server: pairs/s, and the server's CPU per pair (robust to
    the shared machine's load, unlike pairs/s)."""
    out: Figures = {}
    for form in FORMS:
        before = server.cpu_seconds()
        if form == "unbatched":
            run = await grpc_unbatched(mode, server.address, a.concurrency, a)
        else:
            run = await grpc_batched(mode, server.address, a)
        # The warm-up's pairs are not counted; its CPU is, in proportion.
        used = (server.cpu_seconds() - before) * a.duration / (a.duration + a.warmup)
        out[form] = (run.rate, used / run.pairs * 1e6 if run.pairs else 0.0)
    return out


async def main_async(a: argparse.Namespace, root: Path) -> tuple[Rounds[Figures], dict[str, int]]:
    """The interleaved rounds (no mode always runs first or last) and the scrapes' counts."""
    servers = {mode: mode_server(root, mode) for mode in MODES}
    rounds: Rounds[Figures] = Rounds(MODES, a.rounds)
    with contextlib.ExitStack() as stack:
        stack.enter_context(serving(*servers.values()))
        urls = [
            servers[mode].wait_log(r"metrics: (http://\S+/metrics)")[1]
            for mode in MODES
            if mode != "off"
        ]
        scrapes = stack.enter_context(scraper(urls, a.scrape_interval))
        await rounds.run_async(lambda mode: measure(servers[mode], mode, a))
    return rounds, scrapes


def _rate(form: str) -> Callable[[Figures], float]:
    return lambda figures: figures[form][0]


def _cpu(form: str) -> Callable[[Figures], float]:
    return lambda figures: figures[form][1]


def report(
    rounds: Rounds[Figures], result: dict[str, Any], a: argparse.Namespace
) -> dict[str, Any]:
    rows = []
    summary: dict[str, Any] = {}
    for form in FORMS:
        rate, cpu = _rate(form), _cpu(form)
        for mode in MODES:
            values = rounds.values(mode, rate)
            ratio = statistics.median(rounds.ratios(mode, "off", rate))
            cpu_ratio = statistics.median(rounds.ratios(mode, "off", cpu))
            cpu_pair = statistics.median(rounds.values(mode, cpu))
            rows.append(
                [
                    f"{mode}, {form}",
                    round(statistics.median(values)),
                    round(min(values)),
                    round(max(values)),
                    f"{ratio:.3f}",
                    round(cpu_pair, 1),
                    f"{cpu_ratio:.3f}",
                ]
            )
            summary[f"{mode}, {form}"] = {
                "median_rate": statistics.median(values),
                "ratio": ratio,
                "median_cpu_us_per_pair": cpu_pair,
                "cpu_ratio": cpu_ratio,
            }
    headers = [
        "server, form",
        "pairs/s (median)",
        "min",
        "max",
        "pairs/s ratio to off",
        "server CPU µs/pair",
        "CPU ratio to off",
    ]
    print(markdown_table(headers, rows))
    print(f"\nscrapes during the run: {result['scrapes']['scrapes']}")
    print(rounds.load_report())
    rows = []
    for form, per_pair in result["inprocess"].items():
        off = per_pair["off"]
        socket_cpu = statistics.median(rounds.values("off", _cpu(form)))
        for mode in MODES:
            added = (per_pair[mode] - off) * 1e6
            share = f"{added / socket_cpu * 100:+.1f}%" if mode != "off" else "-"
            rows.append([f"{mode}, {form}", round(per_pair[mode] * 1e6, 2), round(added, 2), share])
    print("\nin process, the servicer's own path (best of the repeats):\n")
    headers = ["server, form", "µs/pair", "added µs/pair", "added / off server CPU per pair"]
    print(markdown_table(headers, rows))
    return {"context": run_context(), "args": vars(a), "summary": summary, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per form per round")
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds before each")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--concurrency", type=int, default=32, help="unbatched pairs in flight")
    parser.add_argument("--channels", type=int, default=2, help="client connections")
    parser.add_argument("--batch-workers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--scrape-interval", type=float, default=5.0, help="seconds")
    parser.add_argument("--inprocess-pairs", type=int, default=500, help="pairs per repeat")
    parser.add_argument("--repeats", type=int, default=40, help="in-process repeats per mode")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"observability bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="observability-bench-") as tmp:
        rounds, scrapes = asyncio.run(main_async(a, Path(tmp)))
    result: dict[str, Any] = {
        "rates": {f"{m} | {f}": rounds.values(m, _rate(f)) for m in MODES for f in FORMS},
        "cpu_us_per_pair": {f"{m} | {f}": rounds.values(m, _cpu(f)) for m in MODES for f in FORMS},
        "loads_1min": rounds.loads,
        "scrapes": scrapes,
    }
    result["inprocess"] = {
        form: inprocess(a.inprocess_pairs, 1 if form == "unbatched" else a.batch_size, a.repeats)
        for form in FORMS
    }
    payload = report(rounds, result, a)
    print(f"\nraw numbers: {write_json('observability_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
