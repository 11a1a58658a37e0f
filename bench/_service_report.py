"""The service benchmark's result type, driver loop and report (split out of service_bench.py).

``Run`` holds one scenario's counts and latencies; ``report`` prints the tables and the
ratios the service is held to (unbatched >= 0.9x bare grpc.aio, batch form >= 3x the
fastest Redis with as many operations waiting) and returns them for the JSON file.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench._common import markdown_table, percentile, run_context

REDIS_BATCH = "redis BLPOP/LPUSH, batch form"
REDIS_UNB = "redis BLPOP/LPUSH, unbatched"
REDIS_PIPE = "redis BLPOP/LPUSH, pipelined"
UNB = ("bare grpc.aio, unbatched", "purgatory, unbatched")
BAT = ("bare grpc.aio, batch form", "purgatory, batch form")
STREAM = ("bare grpc.aio, stream form", "purgatory, stream form")


@dataclass
class Run:
    name: str
    concurrency: int
    pairs: int = 0
    retries: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.pairs / self.seconds if self.seconds else 0.0

    def row(self, baseline: float | None) -> list[object]:
        lat = sorted(self.latencies)
        ratio = f"{self.rate / baseline:.2f}x" if baseline else "-"
        return [
            self.name,
            self.concurrency,
            self.pairs,
            round(self.rate),
            percentile(lat, 0.5) * 1e3,
            percentile(lat, 0.99) * 1e3,
            self.retries,
            ratio,
        ]


Worker = Callable[[int, Run, float], Awaitable[None]]


async def drive(run: Run, workers: int, worker: Worker, duration: float, warmup: float) -> Run:
    """Warm up, then let ``workers`` loop for ``duration`` seconds and count their pairs."""
    scratch = Run(run.name, run.concurrency)
    end = time.perf_counter() + warmup
    await asyncio.gather(*(worker(w, scratch, end) for w in range(workers)))
    start = time.perf_counter()
    await asyncio.gather(*(worker(w, run, start + duration) for w in range(workers)))
    run.seconds = time.perf_counter() - start
    return run


def report(result: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    runs: list[Run] = result["runs"]
    by = {r.name: r for r in runs}
    bare_u = by["bare grpc.aio, unbatched"].rate
    redis_p = by.get(REDIS_PIPE)
    redis_b = by.get(REDIS_BATCH)
    # The batch forms are judged against the FASTEST Redis usage at their concurrency.
    redis_best = max(
        (r for r in (redis_p, redis_b) if r is not None), key=lambda r: r.rate, default=None
    )
    best = redis_best.rate if redis_best else None
    baselines = {
        "purgatory, unbatched": bare_u,
        "purgatory, batch form": best,
        "bare grpc.aio, batch form": best,
        STREAM[0]: best,
        STREAM[1]: best,
        "redis BLPOP/LPUSH, unbatched": bare_u,
    }
    label = f"purgatory @{a.compare_label}"
    if a.compare_src:
        baselines[f"{label}, unbatched"] = bare_u
        baselines[f"{label}, batch form"] = best
        baselines[f"{label}, stream form"] = best
    headers = ["system", "in flight", "pairs", "pairs/s", "p50 ms", "p99 ms", "re-signals", "ratio"]
    print(markdown_table(headers, [r.row(baselines.get(r.name)) for r in runs]))
    print()
    print(
        "ratio: purgatory unbatched and redis unbatched vs bare grpc.aio unbatched; "
        "batch and stream forms vs the fastest redis run with the same number of waiting "
        "operations"
        f" ({redis_best.name if redis_best else 'none'})."
    )
    print()
    rows = []
    for name, b in result["bursts"].items():
        codes = ", ".join(f"{k}={v}" for k, v in sorted(b["codes"].items()))
        rows.append(
            [name, b["n"], b["bytes_per_waiter"], b["registered_s"], b["answered_s"], codes]
        )
    print(
        markdown_table(
            ["burst", "long-polls", "RSS bytes/waiter", "all waiting s", "all answered s", "codes"],
            rows,
        )
    )
    per_round: dict[str, list[float]] = result["per_round"]

    def ratio(num: str, *dens: str) -> dict[str, Any] | None:
        """num / den per round (den: the fastest of ``dens`` in that round) and overall."""
        dens = tuple(d for d in dens if d in per_round)
        if num not in per_round or not dens:
            return None
        each = [n / max(per_round[d][i] for d in dens) for i, n in enumerate(per_round[num])]
        overall = by[num].rate / max(by[d].rate for d in dens)
        return {"median": statistics.median(each), "rounds": each, "overall": overall}

    checks: dict[str, Any] = {
        "unbatched >= 0.9x bare": ratio(UNB[1], UNB[0]),
        "batch >= 3x fastest redis (same in flight)": ratio(BAT[1], REDIS_PIPE, REDIS_BATCH),
        "batch vs redis pipelined (one connection per waiter)": ratio(BAT[1], REDIS_PIPE),
        "batch vs redis batch form (pipelined BLPOPs)": ratio(BAT[1], REDIS_BATCH),
        "batch vs redis unbatched": ratio(BAT[1], REDIS_UNB),
        "batch vs bare grpc.aio batch form": ratio(BAT[1], BAT[0]),
        "stream vs batch form": ratio(STREAM[1], BAT[1]),
        "stream vs fastest redis (same in flight)": ratio(STREAM[1], REDIS_PIPE, REDIS_BATCH),
        "stream vs bare grpc.aio stream form": ratio(STREAM[1], STREAM[0]),
    }
    if a.compare_src:
        for form, name in (
            ("unbatched", UNB[1]),
            ("batch form", BAT[1]),
            ("stream form", STREAM[1]),
        ):
            checks[f"{form}: this tree vs {a.compare_label}"] = ratio(name, f"{label}, {form}")
    print()
    print("ratios: median of the per-round ratios [each round] (ratio of the totals)")
    for k, v in checks.items():
        if v is None:
            print(f"- {k}: n/a")
            continue
        each = ", ".join(f"{x:.2f}" for x in v["rounds"])
        print(f"- {k}: {v['median']:.2f} [{each}] ({v['overall']:.2f})")
    cancelled = result["bursts"]["purgatory"]["codes"].get("CANCELLED", 0)
    print(f"- burst of {a.burst} long-polls, CANCELLED calls: {cancelled}")
    checks["burst CANCELLED"] = cancelled
    return {
        "context": run_context(),
        "args": vars(a),
        "runs": [
            {
                "name": r.name,
                "in_flight": r.concurrency,
                "pairs": r.pairs,
                "seconds": r.seconds,
                "pairs_per_s": r.rate,
                "retries": r.retries,
                "p50_ms": percentile(sorted(r.latencies), 0.5) * 1e3,
                "p99_ms": percentile(sorted(r.latencies), 0.99) * 1e3,
            }
            for r in runs
        ],
        "per_round_pairs_per_s": per_round,
        "bursts": result["bursts"],
        "checks": checks,
    }
