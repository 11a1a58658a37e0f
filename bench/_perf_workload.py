"""The workload of ``bench.purgatory_perf`` (Kafka's ``TestPurgatoryPerformance``): its
requests, the completer thread, the stall monitor, and one pass of generator and drain.

What each piece models and why it is built as it is: see ``bench.purgatory_perf``'s
docstring and each class's own.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import itertools
import math
import random
import statistics
import threading
import time
from collections.abc import Iterator
from queue import SimpleQueue
from typing import Any

from purgatory_server import DelayedOperation, DelayedOperationPurgatory, SystemTimer

from bench._common import percentile

try:  # the server's setting; a --compare-src tree without it gets CPython's
    from purgatory_server._service.config.process_tuning import YOUNG_THRESHOLD
except ImportError:  # pragma: no cover
    YOUNG_THRESHOLD = 700

__all__ = ["YOUNG_THRESHOLD", "run"]

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


def _issue(
    args: argparse.Namespace,
    inputs: tuple[list[int], list[float], list[tuple[int, ...]]],
    purgatory: DelayedOperationPurgatory[FakeOperation] | NullPurgatory,
    request: type[Request],
    *,
    completer: CompletionQueue,
    stats: Stats,
) -> tuple[int, int]:
    """The generator: every request at its arrival time; (start ns, requests sent to the
    completer)."""
    arrivals, latencies, keys = inputs
    timeout = args.timeout
    to_complete = 0
    start = time.monotonic_ns()
    watch, add = purgatory.try_complete_else_watch, completer.add
    now_ns, sleep = time.monotonic_ns, time.sleep
    pace_ns = int(args.pace_ms * 1_000_000)
    for i in range(len(arrivals)):
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
    return start, to_complete


def run(args: argparse.Namespace, *, engine: bool = True) -> dict[str, Any]:
    """One pass of the workload; ``engine=False`` is the harness-only baseline.

    The baseline replays the same schedule with :class:`BareRequest` and
    :class:`NullPurgatory`: same generator, same pacing, same completer, no engine. Its
    CPU is what the harness itself costs, and its completer lag is the scheduling noise
    (GIL hand-offs, other load on the machine) that any thread sees, engine or not.
    """
    n = int(args.rate * args.duration)
    inputs = sample_inputs(args, n)
    stats = Stats()
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    if args.young_gc_threshold:
        # As the server's entry point sets it (purgatory_server._service.config.process_tuning).
        gc.set_threshold(args.young_gc_threshold, *thresholds[1:])
    purgatory: DelayedOperationPurgatory[FakeOperation] | NullPurgatory
    if engine:
        purgatory = DelayedOperationPurgatory(
            "fake", timer=make_timer(args), purge_interval=args.purge_interval
        )
    else:
        purgatory = NullPurgatory()
    completer = CompletionQueue(stats)
    monitor = StallMonitor()
    try:
        cpu0 = time.process_time()
        request = FakeOperation if engine else BareRequest
        start, to_complete = _issue(
            args, inputs, purgatory, request, completer=completer, stats=stats
        )
        issued_s = (time.monotonic_ns() - start) / 1e9
        # Drain: everything ends within the timeout (plus reaper slack) of the last request.
        deadline = time.monotonic() + args.timeout / 1000.0 + args.drain_s
        expected = n if engine else to_complete  # the baseline never expires anything
        while stats.finished_count() < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        wall_s = (time.monotonic_ns() - start) / 1e9
        cpu_s = time.process_time() - cpu0
        finished = stats.finished_count()
        num_delayed = purgatory.num_delayed()
    finally:
        completer.stop()
        stalls = monitor.stop()
        purgatory.shutdown()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
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
        "sent_to_completer": to_complete,
        "expected_completed_fraction": expected_completed_fraction(args),
        "num_delayed_after_drain": num_delayed,
        "stalls": stalls,
        **_samples(stats, finished),
    }


def _samples(stats: Stats, finished: int) -> dict[str, Any]:
    """Completed/expired counts, expiry lateness and the completer's lag."""
    lateness = sorted(stats.expired_lateness_ms)
    lag = sorted(stats.completer_lag_ms)
    return {
        "completed": finished - len(lateness),
        "expired": len(lateness),
        "lateness_ms": {
            "p50": percentile(lateness, 0.50),
            "p99": percentile(lateness, 0.99),
            "max": lateness[-1] if lateness else float("nan"),
            "mean": statistics.fmean(lateness) if lateness else float("nan"),
        },
        "completer_lag_ms": {
            "p50": percentile(lag, 0.50),
            "p99": percentile(lag, 0.99),
            "max": lag[-1] if lag else float("nan"),
        },
    }
