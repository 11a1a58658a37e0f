"""One TimerReaper (one thread and one executor) drives many purgatories' timers."""

from __future__ import annotations

import threading
import time

import pytest
from purgatory_server import DelayedOperationPurgatory, MockTime, SystemTimer
from purgatory_server._engine.reaper import TimerReaper

from tests.engine.helpers import FlagOperation, RecordingTask


def _wait_for(predicate: object, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.002)
    return False


def test_many_purgatories_expire_on_one_thread_each_in_time() -> None:
    reaper = TimerReaper("SharedReaper")
    purgatories = [
        DelayedOperationPurgatory[FlagOperation](f"p{i}", reaper=reaper) for i in range(200)
    ]
    try:
        # Two shared threads, whatever the number of purgatories; none of a purgatory.
        names = {t.name for t in threading.enumerate()}
        assert {"SharedReaper", "executor-SharedReaper"} <= names
        assert not any(name.endswith(("-p0", "-p199")) for name in names)
        ops = []
        started = time.monotonic()
        for i, purgatory in enumerate(purgatories):
            op = FlagOperation(20 + (i % 5) * 10)
            assert not purgatory.try_complete_else_watch(op, [f"k{i}"])
            ops.append(op)
        assert _wait_for(lambda: all(op.expirations == 1 for op in ops))
        # The longest timeout is 60 ms: none fired before its time, none far after.
        assert time.monotonic() - started < 5.0
        assert {op.completed_on for op in ops} == {"executor-SharedReaper"}
        assert all(p.num_delayed() == 0 for p in purgatories)
    finally:
        for purgatory in purgatories:
            purgatory.shutdown()
        assert reaper.attached() == 0
        reaper.shutdown()


def test_an_earlier_head_wakes_a_reaper_waiting_for_a_later_one() -> None:
    reaper = TimerReaper("WakeReaper")
    slow = DelayedOperationPurgatory[FlagOperation]("slow", reaper=reaper)
    fast = DelayedOperationPurgatory[FlagOperation]("fast", reaper=reaper)
    try:
        late = FlagOperation(60_000)
        slow.try_complete_else_watch(late, ["a"])
        soon = FlagOperation(10)
        fast.try_complete_else_watch(soon, ["b"])
        assert _wait_for(lambda: soon.expirations == 1, 5.0)
        assert late.expirations == 0 and slow.num_delayed() == 1
    finally:
        slow.shutdown()
        fast.shutdown()
        reaper.shutdown()


def test_mock_clock_steps_fire_in_order_across_timers() -> None:
    clock = MockTime()
    reaper = TimerReaper("MockReaper", time=clock)
    log: list[tuple[object, int]] = []
    timers = [SystemTimer(f"t{i}", reaper=reaper) for i in range(3)]
    try:
        for i, timer in enumerate(timers):
            timer.add(RecordingTask(100 * (i + 1), f"t{i}", clock, log))
        clock.sleep(150)
        assert _wait_for(lambda: len(log) == 1)
        clock.sleep(200)
        assert _wait_for(lambda: len(log) == 3)
        assert [name for name, _ in log] == ["t0", "t1", "t2"]
        assert all(at >= 100 * (i + 1) for i, (_, at) in enumerate(log))
    finally:
        for timer in timers:
            timer.shutdown()
        reaper.shutdown()


def test_a_shut_down_timer_is_not_driven_and_holds_nothing() -> None:
    clock = MockTime()
    reaper = TimerReaper("DetachReaper", time=clock)
    log: list[tuple[object, int]] = []
    gone = SystemTimer("gone", reaper=reaper)
    kept = SystemTimer("kept", reaper=reaper)
    gone.add(RecordingTask(50, "gone", clock, log))
    kept.add(RecordingTask(60, "kept", clock, log))
    gone.shutdown()
    assert reaper.attached() == 1
    clock.sleep(100)
    assert _wait_for(lambda: len(log) == 1)
    assert log[0][0] == "kept"
    kept.shutdown()
    reaper.shutdown()


def test_tasks_already_due_run_on_the_shared_executor() -> None:
    clock = MockTime()
    reaper = TimerReaper("ExecReaper", time=clock)
    log: list[tuple[object, int]] = []
    timer = SystemTimer("due", reaper=reaper)
    task = RecordingTask(0, "now", clock, log)
    timer.add(task)
    assert timer._wait_executor_idle(5.0)
    assert task.thread == "executor-ExecReaper"
    timer.shutdown()
    reaper.shutdown()


def test_a_timer_on_another_clock_is_refused() -> None:
    reaper = TimerReaper("ClockReaper", time=MockTime())
    with pytest.raises(ValueError, match="reaper's clock"):
        SystemTimer("other", time=MockTime(), reaper=reaper)
    reaper.shutdown()


def test_the_lazy_mode_purges_on_the_shared_reaper() -> None:
    reaper = TimerReaper("PurgeReaper")
    purgatory = DelayedOperationPurgatory[FlagOperation](
        "lazy", reaper=reaper, unwatch_on_complete=False, purge_interval=1
    )
    try:
        ops = [FlagOperation(60_000) for _ in range(10)]
        for i, op in enumerate(ops):
            purgatory.try_complete_else_watch(op, [f"k{i}"])
        for op in ops:
            op.force_complete()
        assert purgatory.watched() == 10  # lazy: still listed until a purge
        assert _wait_for(lambda: purgatory.watched() == 0, 5.0)
    finally:
        purgatory.shutdown()
        reaper.shutdown()
