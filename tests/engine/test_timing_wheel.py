"""The wheel's placement and cascading, checked on MockTime (seed 001's worked example)."""

from __future__ import annotations

import random

import pytest
from purgatory_server import MockTime, SystemTimer, TimerTaskEntry, TimerTaskList, TimingWheel
from purgatory_server._engine.counter import TaskCounter
from purgatory_server._engine.delay_queue import DelayQueue

from .helpers import RecordingTask, step


@pytest.fixture
def clock() -> MockTime:
    return MockTime(start_ms=0)


@pytest.fixture
def timer(clock: MockTime):
    t = SystemTimer("test", tick_ms=1, wheel_size=20, start_ms=0, time=clock)
    yield t
    t.shutdown()


def occupied(wheel: TimingWheel) -> dict[int, int]:
    return {i: len(wheel.bucket(i)) for i in range(wheel.wheel_size) if len(wheel.bucket(i))}


def test_wheel_geometry_matches_kafka(timer: SystemTimer, clock: MockTime) -> None:
    log: list[tuple[object, int]] = []
    timer.add(RecordingTask(450, "t450", clock, log))
    w1 = timer.timing_wheel
    w2 = w1.overflow_wheel
    assert w2 is not None
    w3 = w2.overflow_wheel
    assert w3 is not None
    assert (w1.tick_ms, w1.interval) == (1, 20)
    assert (w2.tick_ms, w2.interval) == (20, 400)
    assert (w3.tick_ms, w3.interval) == (400, 8000)


def test_seed_001_worked_example(timer: SystemTimer, clock: MockTime) -> None:
    log: list[tuple[object, int]] = []
    t350 = RecordingTask(350, "t350", clock, log)
    t450 = RecordingTask(450, "t450", clock, log)
    timer.add(t350)
    timer.add(t450)
    w1 = timer.timing_wheel
    w2, w3 = w1.overflow_wheel, w1.overflow_wheel.overflow_wheel  # type: ignore[union-attr]
    assert w2 is not None and w3 is not None
    # 350 ms does not fit the 20 ms first wheel: second wheel, slot 350 // 20 = 17.
    assert occupied(w2) == {17: 1}
    assert w2.bucket(17).expiration == 340
    # 450 ms does not fit the 400 ms second wheel: third wheel, slot 1, expiring at 400.
    assert occupied(w3) == {1: 1}
    assert w3.bucket(1).expiration == 400
    assert occupied(w1) == {}
    assert timer.size() == 2

    step(timer, clock, 340)
    # At 340 the 350 task demotes to the first wheel (slot 350 % 20 = 10).
    assert occupied(w1) == {10: 1} and log == []
    step(timer, clock, 10)
    assert log == [("t350", 350)]

    step(timer, clock, 50)  # now 400: the third wheel's bucket 1 is flushed
    assert occupied(w3) == {}
    # 50 ms left: into the second wheel's bucket for [440, 460).
    assert occupied(w2) == {440 // 20 % 20: 1}
    assert w2.bucket(2).expiration == 440
    step(timer, clock, 40)  # now 440: 10 ms left, demoted to the first wheel
    assert occupied(w2) == {}
    assert occupied(w1) == {450 % 20: 1}
    assert w1.bucket(10).expiration == 450
    assert log == [("t350", 350)]
    step(timer, clock, 9)
    assert log == [("t350", 350)]
    step(timer, clock, 1)
    assert log == [("t350", 350), ("t450", 450)]
    assert timer.size() == 0


def test_bucket_reuse_for_a_passed_tick(timer: SystemTimer, clock: MockTime) -> None:
    """Seed 001: at time 2, a 19 ms task reuses slot 1, whose tick already passed."""
    log: list[tuple[object, int]] = []
    timer.add(RecordingTask(1, "a", clock, log))
    # A task due at 2 makes the reaper move the wheel's pointer to 2 (the pointer only
    # moves when a bucket is due).
    timer.add(RecordingTask(2, "c", clock, log))
    first = timer.timing_wheel.bucket(1)
    step(timer, clock, 1)
    assert log == [("a", 1)]
    step(timer, clock, 1)
    assert timer.timing_wheel.current_time == 2
    log.remove(("c", 2))
    timer.add(RecordingTask(19, "b", clock, log))
    assert timer.timing_wheel.bucket(21 % 20) is first
    assert first.expiration == 21
    step(timer, clock, 18)
    assert log == [("a", 1)]
    step(timer, clock, 1)
    assert log == [("a", 1), ("b", 21)]


def test_already_expired_task_runs_immediately_on_executor(
    timer: SystemTimer, clock: MockTime
) -> None:
    log: list[tuple[object, int]] = []
    task = RecordingTask(0, "now", clock, log)
    negative = RecordingTask(-5, "past", clock, log)
    timer.add(task)
    timer.add(negative)
    # No clock movement and no advance_clock: due tasks go straight to the executor.
    assert timer._wait_executor_idle(5.0)
    assert sorted(log) == [("now", 0), ("past", 0)]
    assert task.thread == "executor-test"
    assert timer.size() == 0


def test_thousand_mixed_delays_fire_once_never_early(timer: SystemTimer, clock: MockTime) -> None:
    rng = random.Random(42)
    log: list[tuple[object, int]] = []
    tasks = [RecordingTask(rng.randrange(0, 20_000), i, clock, log) for i in range(1000)]
    for task in tasks:
        timer.add(task)
    horizon = max(t.delay_ms for t in tasks)
    now = 0
    while now <= horizon:
        ms = rng.randrange(1, 50)
        step(timer, clock, ms)
        now += ms
        for name, fired_at in log:
            assert fired_at >= tasks[name].delay_ms, f"task {name} fired early"  # type: ignore[index]
    fired = [name for name, _ in log]
    assert sorted(fired) == list(range(1000))  # type: ignore[type-var]
    assert all(t.runs == 1 for t in tasks)
    assert timer.size() == 0


def test_cancelled_tasks_never_fire(timer: SystemTimer, clock: MockTime) -> None:
    log: list[tuple[object, int]] = []
    tasks = [RecordingTask(d, d, clock, log) for d in range(1, 2000, 7)]
    for task in tasks:
        timer.add(task)
    cancelled = {t.name for t in tasks[::2]}
    for task in tasks[::2]:
        task.cancel()
        assert task.is_cancelled()
    assert timer.size() == len(tasks) - len(cancelled)
    for _ in range(2100):
        step(timer, clock, 1)
    fired = {name for name, _ in log}
    assert fired.isdisjoint(cancelled)
    assert fired == {t.name for t in tasks[1::2]}
    assert timer.size() == 0


def test_cancel_is_idempotent_and_cancel_after_fire_is_harmless(
    timer: SystemTimer, clock: MockTime
) -> None:
    log: list[tuple[object, int]] = []
    task = RecordingTask(5, "x", clock, log)
    timer.add(task)
    task.cancel()
    task.cancel()
    assert timer.size() == 0
    fired = RecordingTask(1, "y", clock, log)
    timer.add(fired)
    step(timer, clock, 1)
    fired.cancel()
    assert log == [("y", 1)]
    assert timer.size() == 0


def test_task_cancelled_before_add_never_fires(timer: SystemTimer, clock: MockTime) -> None:
    log: list[tuple[object, int]] = []
    task = RecordingTask(0, "pre", clock, log)
    task.cancel()
    timer.add(task)
    assert timer._wait_executor_idle(5.0)
    assert log == []


def test_readd_moves_lists_without_changing_count() -> None:
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    clock = MockTime()
    task = RecordingTask(10, "t", clock, [])
    entry = TimerTaskEntry(task, 10)
    a.add(entry)
    assert counter.get() == 1 and len(a) == 1
    b.add(entry)
    assert counter.get() == 1
    assert (len(a), len(b)) == (0, 1)
    assert entry.list is b
    # Binding the task to a new entry removes the old one from its list.
    TimerTaskEntry(task, 20)
    assert counter.get() == 0 and len(b) == 0


def test_readded_task_fires_once_at_its_new_time(timer: SystemTimer, clock: MockTime) -> None:
    log: list[tuple[object, int]] = []
    task = RecordingTask(5, "t", clock, log)
    timer.add(task)
    task.delay_ms = 30
    timer.add(task)
    assert timer.size() == 1
    for _ in range(40):
        step(timer, clock, 1)
    assert log == [("t", 30)]


def test_list_flush_and_foreach() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    clock = MockTime()
    tasks = [RecordingTask(i, i, clock, []) for i in range(5)]
    entries = [TimerTaskEntry(t, i) for i, t in enumerate(tasks)]
    for e in entries:
        bucket.add(e)
    assert bucket.set_expiration(7) is True
    assert bucket.set_expiration(7) is False
    tasks[2].cancel()
    seen: list[object] = []
    bucket.foreach(lambda t: seen.append(t.name))  # type: ignore[attr-defined]
    assert seen == [0, 1, 3, 4]
    flushed = bucket.flush()
    assert [e.timer_task.name for e in flushed] == [0, 1, 3, 4]  # type: ignore[union-attr]
    assert bucket.expiration == -1
    assert len(bucket) == 0 and counter.get() == 0
    assert all(e.list is None for e in flushed)


def test_wheel_rejects_bad_geometry() -> None:
    clock = MockTime()
    with pytest.raises(ValueError, match="tick_ms"):
        TimingWheel(0, 20, 0, TaskCounter(), DelayQueue(clock))
    with pytest.raises(ValueError, match="wheel_size"):
        TimingWheel(1, 1, 0, TaskCounter(), DelayQueue(clock))


def test_start_time_rounded_to_tick() -> None:
    clock = MockTime(start_ms=1003)
    timer = SystemTimer("r", tick_ms=10, wheel_size=8, time=clock)
    try:
        assert timer.timing_wheel.current_time == 1000
        log: list[tuple[object, int]] = []
        timer.add(RecordingTask(25, "t", clock, log))  # due at 1028, bucket [1020, 1030)
        step(timer, clock, 16)  # 1019
        assert log == []
        step(timer, clock, 1)  # 1020: the bucket is due; the tick is 10 ms
        assert log == [("t", 1020)]
    finally:
        timer.shutdown()
