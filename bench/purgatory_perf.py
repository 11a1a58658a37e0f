"""Kafka's purgatory workload: a Python port of ``TestPurgatoryPerformance``.

The structure follows Kafka's tool (``kafka.TestPurgatoryPerformance``):

- The **generator** (the main thread) issues requests at exponentially distributed
  inter-arrival times for ``--rate`` requests/s. It paces by an absolute schedule: it
  sleeps until the next arrival is due and, when it is behind, issues the backlog in a
  burst, so the achieved rate measures capacity rather than sleep accuracy.
- Each request is a :class:`FakeOperation` with ``delay_ms = --timeout`` that watches
  ``--keys`` keys drawn from ``--key-space-size``, submitted with
  ``try_complete_else_watch``. Its completion latency is sampled from a log-normal
  distribution fitted to ``--pct50`` and ``--pct75``: ``mu = ln(pct50)``,
  ``sigma = (ln(pct75) - ln(pct50)) / 0.6745`` (0.6745 is the standard normal's 75th
  percentile).
- A separate **completer** thread (Kafka's ``CompletionQueue``) takes the requests whose
  sampled latency is below the timeout and calls ``force_complete`` on each when its time
  comes, ticking once per millisecond (see :class:`CompletionQueue`). The rest expire
  through the purgatory's reaper (on), on the real monotonic clock.
- The timer and process run as the server configures them (expired tasks on the reaper,
  a 1 ms GIL switch interval, the server's young-generation GC threshold); options give
  Kafka's executor and CPython's defaults back.

Reported: target vs achieved request rate (requests issued / time to issue them), CPU ms
per 1,000 requests (``time.process_time`` over the whole run including the drain, all
threads), expiry lateness p50/p99/max (``on_expiration``'s monotonic time minus the due
time, i.e. submit time + timeout; it can be slightly negative because the wheel truncates
the submit time to whole milliseconds), the completer's own lag (a harness sanity
check), and completed vs expired counts against the log-normal's expected split.
A harness-only baseline (no engine) replays the same schedule in the same run, and a
:class:`StallMonitor` tells OS starvation from our own GIL-holding stalls.

Inputs (arrival gaps, latencies, keys) are drawn from a seeded RNG before the clock starts,
as Kafka's tool pre-samples them, and then frozen out of the garbage collector's view
(``gc.freeze``) so the harness's own data does not inflate collection pauses. This is a
benchmark, not a test: numbers on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import inspect
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from queue import SimpleQueue
from typing import Any

from purgatory_server import DelayedOperation, DelayedOperationPurgatory, SystemTimer

try:  # the server's setting; a --compare-src tree without it gets CPython's
    from purgatory_server._service.gc_tuning import YOUNG_THRESHOLD
except ImportError:  # pragma: no cover
    YOUNG_THRESHOLD = 700

from bench._common import markdown_table, percentile, run_context, write_json

Z75 = 0.6745  # the standard normal's 75th percentile


class Stats:
    """Counters and samples written by the executor, completer and generator threads.

    ``itertools.count`` and ``list.append`` are single C calls, atomic under the GIL, so
    no lock is needed; the main thread reads them only after the run has drained.
    """

    def __init__(self) -> None:
        self.finished: Iterator[int] = itertools.count()
        self._reads = 0
        self.expired_lateness_ms: list[float] = []
        self.completer_lag_ms: list[float] = []

    def finished_count(self) -> int:
        """Operations completed so far. Main thread only: each read advances the count once."""
        value = next(self.finished) - self._reads
        self._reads += 1
        return value


class FakeOperation(DelayedOperation):
    """Kafka's FakeOperation: completes when its sampled latency has passed."""

    __slots__ = ("completes_at_ns", "due_ns", "stats")

    def __init__(self, timeout_ms: int, latency_ms: float, stats: Stats, now: int) -> None:
        super().__init__(timeout_ms)
        # ``now``: the generator's clock reading for this request (one read per request,
        # shared with the pacing, instead of one more here).
        self.completes_at_ns = now + int(latency_ms * 1_000_000)
        self.due_ns = now + timeout_ms * 1_000_000
        self.stats = stats

    def try_complete(self) -> bool:
        if time.monotonic_ns() >= self.completes_at_ns:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        next(self.stats.finished)

    def on_expiration(self) -> None:
        self.stats.expired_lateness_ms.append((time.monotonic_ns() - self.due_ns) / 1e6)


class BareRequest:
    """The baseline's request: the harness's bookkeeping without any engine object."""

    __slots__ = ("completes_at_ns", "stats")

    def __init__(self, timeout_ms: int, latency_ms: float, stats: Stats, now: int) -> None:
        self.completes_at_ns = now + int(latency_ms * 1_000_000)
        self.stats = stats

    def force_complete(self) -> bool:
        next(self.stats.finished)
        return True


class NullPurgatory:
    """The baseline's purgatory: accepts everything, watches nothing, never expires."""

    def try_complete_else_watch(self, operation: object, watch_keys: object) -> bool:
        return False

    def num_delayed(self) -> int:
        return 0

    def shutdown(self) -> None:
        pass


Request = FakeOperation | BareRequest


class CompletionQueue:
    """The completer: force-completes each operation when its sampled latency is up.

    Kafka's ``CompletionQueue`` is a ``DelayQueue`` the generator offers to. Here the
    generator's side is one C call per request (``SimpleQueue.put``, no Python-level lock or
    notify), and the completer thread wakes once per ``tick_ms`` (1 ms), moves what arrived
    into its private slots (one list per due millisecond) and force-completes everything
    whose time has come. Completions are therefore up to a tick late, which the completer
    lag reports. Why: the harness shares the GIL with the engine; a heap under a condition
    with a notify per new head, and a wake-up per due time, made it a third of the
    process's CPU at 20,000 requests/s (docs/benchmarks.md §14).

    Thread safety: ``add`` from the generator; everything else on the completer thread.
    """

    def __init__(self, stats: Stats, tick_ms: float = 1.0) -> None:
        self._stats = stats
        self._inbox: SimpleQueue[Request] = SimpleQueue()
        self.add = self._inbox.put
        self._tick_s = tick_ms / 1000.0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="completer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        get, empty = self._inbox.get_nowait, self._inbox.empty
        lag, tick_s, stopped = self._stats.completer_lag_ms, self._tick_s, self._stopped
        slots: dict[int, list[Request]] = {}
        next_ms = time.monotonic_ns() // 1_000_000
        while not stopped.wait(tick_s):
            while not empty():
                op = get()
                at_ms = op.completes_at_ns // 1_000_000
                slot = slots.get(at_ms)
                if slot is None:
                    slots[at_ms] = [op]
                else:
                    slot.append(op)
            now = time.monotonic_ns()
            now_ms = now // 1_000_000
            # Every past millisecond slot (one whose op arrived late is still visited:
            # the range starts at the smallest key), then what is due in the current one.
            if slots:
                for ms in range(min(next_ms, *slots), now_ms):
                    for op in slots.pop(ms, ()):
                        lag.append((now - op.completes_at_ns) / 1e6)
                        op.force_complete()
                current = slots.get(now_ms)
                if current:
                    keep = [op for op in current if op.completes_at_ns > now]
                    for op in current:
                        if op.completes_at_ns <= now:
                            lag.append((now - op.completes_at_ns) / 1e6)
                            op.force_complete()
                    slots[now_ms] = keep
            next_ms = now_ms

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5.0)


class StallMonitor:
    """Tells machine starvation from the engine's own stalls.

    A thread that sleeps 1 ms at a time records every gap longer than ``threshold_ms``
    together with the process's CPU time over the gap. A gap during which the process
    used little CPU (< 0.5 cores) means the OS did not run it (other load on the machine);
    a gap with the process busy means a thread of ours held the GIL (a purge, a GC pass).
    """

    def __init__(self, threshold_ms: float = 10.0) -> None:
        self._threshold_ns = int(threshold_ms * 1_000_000)
        self.gaps: list[tuple[float, float]] = []  # (gap ms, process CPU / wall over it)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last, last_cpu = time.monotonic_ns(), time.process_time_ns()
        while not self._stop.is_set():
            time.sleep(0.001)
            now, cpu = time.monotonic_ns(), time.process_time_ns()
            if now - last > self._threshold_ns:
                self.gaps.append(((now - last) / 1e6, (cpu - last_cpu) / (now - last)))
            last, last_cpu = now, cpu

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(5.0)
        starved = [g for g, busy in self.gaps if busy < 0.5]
        busy = [g for g, b in self.gaps if b >= 0.5]
        return {
            "starved_ms": sum(starved),
            "starved_max_ms": max(starved, default=0.0),
            "busy_stall_ms": sum(busy),
            "busy_stall_max_ms": max(busy, default=0.0),
        }


def sample_inputs(
    args: argparse.Namespace, n: int
) -> tuple[list[int], list[float], list[tuple[int, ...]]]:
    """Arrival offsets (ns from start), latencies (ms) and key tuples for ``n`` requests."""
    rng = random.Random(args.seed)
    mu = math.log(args.pct50)
    sigma = (math.log(args.pct75) - math.log(args.pct50)) / Z75
    arrivals: list[int] = []
    t = 0.0
    for _ in range(n):
        t += rng.expovariate(args.rate)
        arrivals.append(int(t * 1e9))
    latencies = [rng.lognormvariate(mu, sigma) for _ in range(n)]
    space = range(args.key_space_size)
    keys = [tuple(rng.sample(space, args.keys)) for _ in range(n)]
    return arrivals, latencies, keys


def expected_completed_fraction(args: argparse.Namespace) -> float:
    """P(latency < timeout) under the fitted log-normal."""
    sigma = (math.log(args.pct75) - math.log(args.pct50)) / Z75
    z = (math.log(args.timeout) - math.log(args.pct50)) / sigma
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def make_timer(args: argparse.Namespace) -> SystemTimer:
    """The purgatory's timer: as the server builds it (expiries run on the reaper) unless
    ``--kafka-executor``; a tree whose ``SystemTimer`` has no ``inline_expiry`` (an older
    ``--compare-src``) gets its only kind."""
    if not args.kafka_executor and "inline_expiry" in inspect.signature(SystemTimer).parameters:
        return SystemTimer("fake", inline_expiry=True)
    return SystemTimer("fake")


def run(args: argparse.Namespace, *, engine: bool = True) -> dict[str, Any]:
    """One pass of the workload; ``engine=False`` is the harness-only baseline.

    The baseline replays the same schedule with :class:`BareRequest` and
    :class:`NullPurgatory`: same generator, same pacing, same completer, no engine. Its
    CPU is what the harness itself costs, and its completer lag is the scheduling noise
    (GIL hand-offs, other load on the machine) that any thread sees, engine or not.
    """
    n = int(args.rate * args.duration)
    arrivals, latencies, keys = sample_inputs(args, n)
    stats = Stats()
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    if args.young_gc_threshold:
        # As the server's entry point sets it (purgatory_server._service.gc_tuning).
        gc.set_threshold(args.young_gc_threshold, *thresholds[1:])
    purgatory: DelayedOperationPurgatory[FakeOperation] | NullPurgatory
    if engine:
        purgatory = DelayedOperationPurgatory(
            "fake", timer=make_timer(args), purge_interval=args.purge_interval
        )
    else:
        purgatory = NullPurgatory()
    request = FakeOperation if engine else BareRequest
    completer = CompletionQueue(stats)
    monitor = StallMonitor()
    timeout = args.timeout
    to_complete = 0
    try:
        cpu0 = time.process_time()
        start = time.monotonic_ns()
        watch, add = purgatory.try_complete_else_watch, completer.add
        now_ns, sleep = time.monotonic_ns, time.sleep
        pace_ns = int(args.pace_ms * 1_000_000)
        for i in range(n):
            now = now_ns()
            ahead = start + arrivals[i] - now
            if ahead > 0:
                # Sleep at least a pacing slice, then issue the backlog: at 50,000/s the
                # mean gap is 20 us, far below what a sleep costs (see CompletionQueue).
                sleep(max(ahead, pace_ns) / 1e9)
                now = now_ns()
            latency = latencies[i]
            op = request(timeout, latency, stats, now)
            if latency < timeout:
                add(op)
                to_complete += 1
            watch(op, keys[i])
        issued_s = (now_ns() - start) / 1e9
        # Drain: everything ends within the timeout (plus reaper slack) of the last request.
        deadline = time.monotonic() + timeout / 1000.0 + args.drain_s
        expected = n if engine else to_complete  # the baseline never expires anything
        while stats.finished_count() < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        wall_s = (now_ns() - start) / 1e9
        cpu_s = time.process_time() - cpu0
        finished = stats.finished_count()
        num_delayed = purgatory.num_delayed()
    finally:
        completer.stop()
        stalls = monitor.stop()
        purgatory.shutdown()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    lateness = sorted(stats.expired_lateness_ms)
    lag = sorted(stats.completer_lag_ms)
    expired = len(lateness)
    return {
        "mode": "purgatory" if engine else "harness only",
        "requests": n,
        "target_rate": args.rate,
        "achieved_rate": n / issued_s,
        "issue_s": issued_s,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "cpu_ms_per_1000": cpu_s * 1000.0 / n * 1000.0,
        "finished": finished,
        "completed": finished - expired,
        "expired": expired,
        "sent_to_completer": to_complete,
        "expected_completed_fraction": expected_completed_fraction(args),
        "num_delayed_after_drain": num_delayed,
        "lateness_ms": {
            "p50": percentile(lateness, 0.50),
            "p99": percentile(lateness, 0.99),
            "max": lateness[-1] if lateness else float("nan"),
            "mean": statistics.fmean(lateness) if lateness else float("nan"),
        },
        "stalls": stalls,
        "completer_lag_ms": {
            "p50": percentile(lag, 0.50),
            "p99": percentile(lag, 0.99),
            "max": lag[-1] if lag else float("nan"),
        },
    }


def report(r: dict[str, Any], base: dict[str, Any] | None) -> str:
    """The engine's run next to the harness-only baseline, then the acceptance verdict."""
    runs = [r] if base is None else [r, base]

    rows: list[list[object]] = [
        ["target rate (req/s)", *(float(x["target_rate"]) for x in runs)],
        ["achieved rate (req/s)", *(x["achieved_rate"] for x in runs)],
        ["achieved / target", *(x["achieved_rate"] / x["target_rate"] for x in runs)],
        ["requests", *(x["requests"] for x in runs)],
        ["CPU ms per 1,000 requests (all threads)", *(x["cpu_ms_per_1000"] for x in runs)],
        ["CPU utilisation (cores)", *(x["cpu_s"] / x["wall_s"] for x in runs)],
        ["completed by the completer", *(x["completed"] for x in runs)],
        ["expired", *(x["expired"] for x in runs)],
        ["expiry lateness p50 (ms)", *(x["lateness_ms"]["p50"] for x in runs)],
        ["expiry lateness p99 (ms)", *(x["lateness_ms"]["p99"] for x in runs)],
        ["expiry lateness max (ms)", *(x["lateness_ms"]["max"] for x in runs)],
        ["completer lag p50 (ms)", *(x["completer_lag_ms"]["p50"] for x in runs)],
        ["completer lag p99 (ms)", *(x["completer_lag_ms"]["p99"] for x in runs)],
        ["completer lag max (ms)", *(x["completer_lag_ms"]["max"] for x in runs)],
        [
            "stalls > 10 ms, process starved: total / max (ms)",
            *(
                f"{x['stalls']['starved_ms']:.0f} / {x['stalls']['starved_max_ms']:.0f}"
                for x in runs
            ),
        ],
        [
            "stalls > 10 ms, process busy: total / max (ms)",
            *(
                f"{x['stalls']['busy_stall_ms']:.0f} / {x['stalls']['busy_stall_max_ms']:.0f}"
                for x in runs
            ),
        ],
        ["operations still delayed after drain", *(x["num_delayed_after_drain"] for x in runs)],
    ]
    headers = ["metric", r["mode"]] + ([] if base is None else [base["mode"]])
    lines = [markdown_table(headers, rows), ""]
    frac = r["completed"] / r["requests"]
    lines.append(
        f"completed fraction {frac:.3f}, expected from the log-normal "
        f"{r['expected_completed_fraction']:.3f}"
    )
    if base is not None:
        engine_cpu = r["cpu_ms_per_1000"] - base["cpu_ms_per_1000"]
        lines.append(
            f"engine CPU (purgatory minus harness): {engine_cpu:.1f} ms per 1,000 requests "
            f"= {engine_cpu:.1f} us per request"
        )
    lines.append(acceptance(r))
    return "\n".join(lines)


def acceptance(r: dict[str, Any]) -> str:
    """Issue 2's verdict (p99 <= 5 ms at the run's rate) and issue 15's (>= 50,000/s, p99 <=
    2 ms)."""
    ratio = r["achieved_rate"] / r["target_rate"]
    p99 = r["lateness_ms"]["p99"]
    ok = ratio >= 0.95
    i15 = r["target_rate"] >= 50_000 and ok and p99 <= 2.0
    return (
        f"acceptance: achieved/target = {ratio:.3f} (>= 0.95): {'PASS' if ok else 'FAIL'}; "
        f"expiry lateness p99 = {p99:.2f} ms (<= 5): {'PASS' if p99 <= 5.0 else 'FAIL'}; "
        f"issue 15 (>= 50,000/s, >= 0.95, p99 <= 2 ms): {'PASS' if i15 else 'FAIL'}"
    )


def compare(args: argparse.Namespace, argv: list[str]) -> int:
    """``--rounds`` alternating engine passes of this tree and ``--compare-src``'s, each in
    a child process running this file's harness (so only the engine differs)."""
    skip = {"--compare-src", "--compare-label", "--rounds", "--json"}
    child: list[str] = []
    i = 0
    while i < len(argv):
        arg, name = argv[i], argv[i].split("=", 1)[0]
        i += 1
        if name not in skip:
            child.append(arg)
        elif "=" not in arg and i < len(argv) and not argv[i].startswith("--"):
            i += 1  # its value
    src = os.path.abspath(args.compare_src)
    trees = {
        "this tree": dict(os.environ),
        args.compare_label: {**os.environ, "PYTHONPATH": f"{src}/server{os.pathsep}{src}/proto"},
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for name, env in trees.items():
                out = os.path.join(tmp, f"{rnd}-{len(results[name])}-{hash(name)}.json")
                cmd = [sys.executable, "-m", "bench.purgatory_perf", *child]
                cmd += ["--no-baseline", "--json", out]
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                with open(out) as fh:
                    results[name].append(json.load(fh)["result"])
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    rows: list[list[object]] = []
    for name, runs in results.items():
        for i, r in enumerate(runs):
            rows.append(
                [
                    name,
                    i + 1,
                    r["achieved_rate"] / r["target_rate"],
                    r["cpu_ms_per_1000"],
                    r["lateness_ms"]["p50"],
                    r["lateness_ms"]["p99"],
                    r["lateness_ms"]["max"],
                    r["completer_lag_ms"]["p99"],
                ]
            )
    headers = ["engine", "round", "achieved/target", "CPU ms / 1,000", "lateness p50"]
    headers += ["lateness p99", "lateness max", "completer lag p99"]
    print(f"# rate={args.rate:g}/s duration={args.duration:g} s, load {os.getloadavg()}\n")
    print(markdown_table(headers, rows))
    for name, runs in results.items():
        median = sorted(runs, key=lambda r: r["lateness_ms"]["p99"])[len(runs) // 2]
        print(f"\n{name}, the round with the median p99: {acceptance(median)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.purgatory_perf", description=__doc__)
    p.add_argument("--rate", type=float, default=20_000.0, help="target requests per second")
    p.add_argument("--pct50", type=float, default=20.0, help="median completion latency, ms")
    p.add_argument("--pct75", type=float, default=50.0, help="75th pct completion latency, ms")
    p.add_argument("--timeout", type=int, default=100, help="operation timeout, ms")
    p.add_argument("--keys", type=int, default=3, help="keys each request watches")
    p.add_argument("--key-space-size", type=int, default=100, help="number of distinct keys")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of request generation")
    p.add_argument("--purge-interval", type=int, default=1000)
    p.add_argument("--drain-s", type=float, default=5.0, help="extra drain time after timeout")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="smoke run: 2 s of generation")
    p.add_argument("--no-baseline", action="store_true", help="skip the harness-only baseline pass")
    p.add_argument("--json", nargs="?", const="", default=None, help="write JSON (path optional)")
    p.add_argument("--watchdog-s", type=float, default=600.0, help="dump stacks and exit if hit")
    p.add_argument(
        "--switch-interval-ms",
        type=float,
        default=1.0,
        help="sys.setswitchinterval for the run (default 1, as the server sets it; "
        "CPython's own default is 5)",
    )
    p.add_argument(
        "--kafka-executor",
        action="store_true",
        help="run expired tasks on the timer's executor thread (Kafka's way) instead of "
        "on the reaper (SystemTimer(inline_expiry=True), as the server does)",
    )
    p.add_argument(
        "--young-gc-threshold",
        type=int,
        default=YOUNG_THRESHOLD,
        help=f"the collector's first threshold during the run (default {YOUNG_THRESHOLD}, as "
        "the server sets it; 0 leaves CPython's 700)",
    )
    p.add_argument(
        "--pace-ms",
        type=float,
        default=1.0,
        help="the generator sleeps at least this long when ahead of schedule",
    )
    p.add_argument(
        "--compare-src",
        help="run the engine pass in child processes, alternating this tree and the engine "
        "of this source tree (e.g. git archive main | tar -x -C DIR); same harness",
    )
    p.add_argument("--compare-label", default="baseline", help="its name in the table")
    p.add_argument("--rounds", type=int, default=3, help="alternations with --compare-src")
    args = p.parse_args(argv)
    if args.compare_src:
        return compare(args, list(sys.argv[1:] if argv is None else argv))
    sys.setswitchinterval(args.switch_interval_ms / 1000.0)
    if args.quick:
        args.duration = 2.0
    if not 0 < args.pct50 < args.pct75:
        p.error("need 0 < --pct50 < --pct75")
    if not 0 < args.keys <= args.key_space_size:
        p.error("need 0 < --keys <= --key-space-size")
    faulthandler.dump_traceback_later(args.watchdog_s, exit=True)

    ctx = run_context()
    print(
        f"# purgatory workload: rate={args.rate:g}/s pct50={args.pct50:g} ms "
        f"pct75={args.pct75:g} ms timeout={args.timeout} ms keys={args.keys}/"
        f"{args.key_space_size} duration={args.duration:g} s"
    )
    print(f"# {ctx}\n")
    result = run(args, engine=True)
    baseline = None if args.no_baseline else run(args, engine=False)
    print(report(result, baseline))
    if args.json is not None:
        payload = {"context": ctx, "args": vars(args), "result": result, "baseline": baseline}
        path = write_json("purgatory_perf", payload, args.json or None)
        print(f"\n# JSON written to {path}")
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
