"""Plot a live purgatory server's metrics, scraped from its Prometheus endpoint.

Starts ``purgatory-server --metrics-listen`` on loopback, drives a workload through the
Python client for about 20 seconds (long-polls answered by signals, operations left to
expire, a subscriber), scrapes ``/metrics`` twice a second, and draws what the scrapes
said into a PNG: delayed operations and watched keys, outcomes per second by state,
expiry lateness (the timer's precision) and wait time to outcome. This is how
docs/observability-metrics.png was made; nothing in it is synthetic.

Needs matplotlib (``.venv/bin/pip install matplotlib``; not a project dependency)::

    .venv/bin/python examples/plot_metrics.py [--out docs/observability-metrics.png]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from purgatory_client import AsyncPurgatoryClient

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(port: int, metrics_port: int) -> Iterator[None]:
    data = tempfile.mkdtemp(prefix="plot-metrics-")
    cmd = [sys.executable, "-m", "purgatory_server", "--listen", f"127.0.0.1:{port}"]
    cmd += ["--metrics-listen", f"127.0.0.1:{metrics_port}", "--data-dir", data]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def scrape(url: str) -> Scrape:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def drive(target: str, seconds: float) -> None:
    """Phase 1: a steady mix; phase 2: a burst of short timers; phase 3: drain."""
    rng = random.Random(7)
    async with AsyncPurgatoryClient(target, timeout=10) as c:
        stream = c.subscribe()
        reader = asyncio.ensure_future(_consume(stream))
        start = time.monotonic()
        serial = 0
        while (elapsed := time.monotonic() - start) < seconds:
            serial += 1
            burst = seconds * 0.4 < elapsed < seconds * 0.6
            timeout_ms = rng.choice((50, 200, 1000)) if burst else rng.choice((500, 2000, 4000))
            key = f"k{serial}"
            await c.try_complete_else_watch([key], timeout_ms)
            if not burst and rng.random() < 0.6:
                asyncio.get_running_loop().call_later(
                    rng.uniform(0.01, 0.4), lambda k=key: asyncio.ensure_future(_signal(c, k))
                )
            await asyncio.sleep(0.004 if burst else 0.01)
        await asyncio.sleep(4.5)  # everything left expires
        reader.cancel()


async def _signal(c: AsyncPurgatoryClient, key: str) -> None:
    await c.check_and_complete(key)


async def _consume(stream: object) -> None:
    async for _ in stream:  # type: ignore[attr-defined]
        pass


async def collect(seconds: float) -> list[tuple[float, Scrape]]:
    port, metrics_port = free_port(), free_port()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    samples: list[tuple[float, Scrape]] = []
    with server(port, metrics_port):
        for _ in range(100):
            try:
                scrape(url)
                break
            except OSError:
                await asyncio.sleep(0.1)
        t0 = time.monotonic()
        load = asyncio.ensure_future(drive(f"127.0.0.1:{port}", seconds))
        while not load.done():
            samples.append((time.monotonic() - t0, await asyncio.to_thread(scrape, url)))
            await asyncio.sleep(0.5)
        await load
        samples.append((time.monotonic() - t0, await asyncio.to_thread(scrape, url)))
    return samples


def value(s: Scrape, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in s.items() if n == name and labels.items() <= dict(ls).items())


def histogram(s: Scrape, name: str, **labels: str) -> tuple[list[float], list[float]]:
    """Bucket upper bounds and the count in each bucket (not cumulative)."""
    cumulative: dict[float, float] = {}
    for (n, ls), v in s.items():
        lab = dict(ls)
        if n == f"{name}_bucket" and labels.items() <= lab.items():
            le = float(lab["le"])
            cumulative[le] = cumulative.get(le, 0.0) + v
    les = sorted(cumulative)
    counts = [cumulative[les[0]]] + [
        cumulative[b] - cumulative[a] for a, b in itertools.pairwise(les)
    ]
    return les, counts


def _label(le: float) -> str:
    if le == float("inf"):
        return "+Inf"
    return f"≤{le:g} s" if le >= 1 else f"≤{le * 1000:g} ms"


def plot(samples: list[tuple[float, Scrape]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = [t for t, _ in samples]
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    fig.suptitle("purgatory server, scraped from --metrics-listen every 0.5 s (real run)")

    ax = axes[0][0]
    ax.plot(ts, [value(s, "purgatory_operations_delayed") for _, s in samples], label="delayed")
    ax.plot(ts, [value(s, "purgatory_keys_watched") for _, s in samples], label="watched keys")
    ax.plot(ts, [value(s, "purgatory_timer_size") for _, s in samples], label="timer size", ls=":")
    ax.set_title("purgatory_operations_delayed, _keys_watched, _timer_size")
    ax.set_xlabel("s")
    ax.legend()

    ax = axes[0][1]
    for state in ("completed", "expired"):
        counts = [value(s, "purgatory_operations_outcomes_total", state=state) for _, s in samples]
        points = list(zip(ts, counts, strict=True))
        rates = [(b - a) / (t1 - t0) for (t0, a), (t1, b) in itertools.pairwise(points)]
        ax.plot(ts[1:], rates, label=state)
    ax.set_title("rate(purgatory_operations_outcomes_total) by state")
    ax.set_xlabel("s")
    ax.set_ylabel("outcomes/s")
    ax.legend()

    last = samples[-1][1]
    ax = axes[1][0]
    les, counts = histogram(last, "purgatory_expiry_lateness_seconds")
    ax.bar(range(len(les)), counts)
    ax.set_xticks(range(len(les)), [_label(le) for le in les], rotation=60, fontsize=7)
    ax.set_title("purgatory_expiry_lateness_seconds (final scrape)")
    ax.set_ylabel("expired operations")

    ax = axes[1][1]
    width = 0.4
    for i, state in enumerate(("completed", "expired")):
        les, counts = histogram(last, "purgatory_operation_wait_duration_seconds", state=state)
        ax.bar([x + i * width for x in range(len(les))], counts, width, label=state)
    ax.set_xticks(range(len(les)), [_label(le) for le in les], rotation=60, fontsize=7)
    ax.set_title("purgatory_operation_wait_duration_seconds (final scrape)")
    ax.set_ylabel("operations")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the workload")
    parser.add_argument("--out", default="docs/observability-metrics.png")
    a = parser.parse_args()
    samples = asyncio.run(collect(a.seconds))
    plot(samples, Path(a.out))
    print(f"{len(samples)} scrapes plotted to {a.out}")


if __name__ == "__main__":
    main()
