"""Real threads: concurrent adds, the reaper on real time, and a completion stress test.

These use the production clock because thread interleavings are the point; every wait is
bounded and the assertions are on counts, not on timings, except the tolerant bounds on
how promptly the reaper fires and stops.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from purgatory_server import DelayedOperationPurgatory, SystemTimer

from .helpers import FlagOperation, RecordingTask


class _Clock:
    """Real monotonic time exposed as MockTime's interface for RecordingTask."""

    def hi_res_clock_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


def test_concurrent_adds_and_cancels_while_the_clock_advances() -> None:
    timer = SystemTimer("conc")
    clock = _Clock()
    log: list[tuple[object, int]] = []
    stop = threading.Event()
    per_thread = 2000
    tasks: list[list[RecordingTask]] = [[] for _ in range(4)]

    def reaper() -> None:
        while not stop.is_set():
            timer.advance_clock(5)

    # Per cancelled task: (ms before its add, ms after its cancel returned). A cancel can
    # lose only to a task already due, so a task that ran anyway must have been due by
    # then. (A fixed "time to spare" bound fails when the thread is descheduled between
    # the add and the cancel on a busy machine, which is no fault of the timer.)
    windows: dict[object, tuple[int, int]] = {}

    def producer(n: int) -> None:
        rng = random.Random(n)
        for i in range(per_thread):
            task = RecordingTask(rng.randrange(0, 60), (n, i), clock, log)  # type: ignore[arg-type]
            tasks[n].append(task)
            added = clock.hi_res_clock_ms()
            timer.add(task)
            if i % 3 == 0:
                task.cancel()
                windows[task.name] = (added, clock.hi_res_clock_ms())

    r = threading.Thread(target=reaper)
    r.start()
    producers = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    try:
        for p in producers:
            p.start()
        for p in producers:
            p.join(30)
        deadline = time.monotonic() + 10
        expected = sum(1 for ts in tasks for i, _ in enumerate(ts) if i % 3 != 0)
        while time.monotonic() < deadline and (timer.size() or len(log) < expected):
            time.sleep(0.01)
        assert timer._wait_executor_idle(10)
    finally:
        stop.set()
        r.join(5)
        timer.shutdown()
    ran = [name for name, _ in log]
    assert len(ran) == len(set(ran)), "a task ran twice"
    cancelled = {t.name for ts in tasks for i, t in enumerate(ts) if i % 3 == 0}
    # A cancel that races with the reaper may lose only if the task had already run.
    raced = [t for ts in tasks for i, t in enumerate(ts) if i % 3 == 0 and t.runs]
    early = [t.name for t in raced if windows[t.name][0] + t.delay_ms > windows[t.name][1] + 1]
    assert not early, f"cancelled before they were due, yet ran: {early[:5]}"
    assert set(ran) | cancelled == {t.name for ts in tasks for t in ts}
    assert timer.size() == 0


def test_reaper_fires_on_real_time_and_stops_promptly() -> None:
    purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory("rt")
    fired = threading.Event()
    fired_at: list[float] = []

    def done(op: FlagOperation) -> None:
        fired_at.append(time.monotonic())
        fired.set()

    try:
        op = FlagOperation(50, on_done=done)
        start = time.monotonic()
        purgatory.try_complete_else_watch(op, ["k"])
        assert fired.wait(5), "the reaper never expired the operation"
        late_ms = (fired_at[0] - start) * 1000 - 50
        assert -1.0 <= late_ms < 500, f"fired {late_ms:.1f} ms after due"
        assert op.expirations == 1
        assert op.completed_on == "executor-rt"
        # The reaper is now blocked in the delay queue for up to 200 ms; shutdown must
        # wake it rather than wait that out.
        time.sleep(0.02)
    finally:
        t0 = time.monotonic()
        purgatory.shutdown()
        stop_ms = (time.monotonic() - t0) * 1000
    assert stop_ms < 150, f"shutdown took {stop_ms:.0f} ms"
    assert "ExpirationReaper-rt" not in {t.name for t in threading.enumerate()}


def _guarded(errors: list[BaseException], fn: Any, *args: Any) -> threading.Thread:
    """A thread running ``fn(*args)`` that records what it raises in ``errors``."""

    def run() -> None:
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised below: a thread's failure fails the test
            errors.append(e)

    return threading.Thread(target=run)


def _run_all(threads: list[threading.Thread], errors: list[BaseException]) -> None:
    """Start every thread, join each (bounded); a thread's failure fails the test."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_stress_every_operation_completes_exactly_once() -> None:
    """Completers, checkers and the reaper race over the same operations."""
    purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "stress", purge_interval=100
    )
    n_ops = 3000
    keys = [f"k{i}" for i in range(20)]
    rng = random.Random(7)
    ops = [FlagOperation(rng.randrange(1, 80)) for _ in range(n_ops)]
    registered = threading.Event()
    errors: list[BaseException] = []

    def register() -> None:
        for op in ops:
            purgatory.try_complete_else_watch(op, rng.sample(keys, 3))
        registered.set()

    def make_ready(seed: int) -> None:
        r = random.Random(seed)
        while not registered.is_set():
            r.choice(ops).ready = True
        for op in r.sample(ops, n_ops // 3):
            op.ready = True

    def checker(seed: int) -> None:
        r = random.Random(seed)
        while not registered.is_set():
            purgatory.check_and_complete(r.choice(keys))
        for _ in range(2000):
            purgatory.check_and_complete(r.choice(keys))

    def forcer(seed: int) -> None:
        r = random.Random(seed)
        while not registered.is_set():
            r.choice(ops).force_complete()

    threads = [_guarded(errors, register)]
    threads += [_guarded(errors, make_ready, s) for s in range(2)]
    threads += [_guarded(errors, checker, 10 + s) for s in range(3)]
    threads += [_guarded(errors, forcer, 20 + s) for s in range(2)]
    try:
        _run_all(threads, errors)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(op.is_completed() for op in ops):
            time.sleep(0.01)
        assert purgatory.timer._wait_executor_idle(10)  # type: ignore[attr-defined]
        for key in keys:
            purgatory.check_and_complete(key)
    finally:
        purgatory.shutdown()
    assert all(op.is_completed() for op in ops)
    assert all(op.completions == 1 for op in ops), "on_complete ran twice"
    assert all(op.expirations <= 1 for op in ops)
    assert purgatory.num_delayed() == 0
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0
