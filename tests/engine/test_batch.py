"""The engine's batch entry points: SystemTimer.add_all and try_complete_else_watch_all.

Each must behave exactly like the single form applied to every element at the same
instant; these tests compare the two on MockTime with the reaper disabled.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from purgatory_server import DelayedOperationPurgatory, MockTime, SystemTimer

from .helpers import FlagOperation, RecordingTask, step


@pytest.fixture
def clock() -> MockTime:
    return MockTime(start_ms=0)


@pytest.fixture
def timer(clock: MockTime) -> Iterator[SystemTimer]:
    t = SystemTimer("batch", tick_ms=1, wheel_size=20, time=clock)
    yield t
    t.shutdown()


def test_add_all_fires_each_task_at_its_own_delay(timer: SystemTimer, clock: MockTime) -> None:
    log: list[tuple[object, int]] = []
    delays = [5, 1, 450, 20, 5, 399]
    tasks = [RecordingTask(d, i, clock, log) for i, d in enumerate(delays)]
    timer.add_all(tasks)
    assert timer.size() == len(delays)
    for _ in range(450):
        step(timer, clock, 1)
    assert sorted(log, key=lambda e: (e[1], str(e[0]))) == sorted(
        ((i, d) for i, d in enumerate(delays)), key=lambda e: (e[1], str(e[0]))
    )
    assert all(t.runs == 1 and t.thread == "executor-batch" for t in tasks)
    assert timer.size() == 0


def test_add_all_runs_due_tasks_on_the_executor_and_drops_cancelled(
    timer: SystemTimer, clock: MockTime
) -> None:
    log: list[tuple[object, int]] = []
    due = RecordingTask(0, "due", clock, log)
    cancelled = RecordingTask(10, "cancelled", clock, log)
    cancelled.cancel()
    later = RecordingTask(10, "later", clock, log)
    timer.add_all([due, cancelled, later])
    assert timer._wait_executor_idle(10.0)
    assert log == [("due", 0)] and due.thread == "executor-batch"
    assert timer.size() == 1  # only "later" is in a bucket
    step(timer, clock, 10)
    assert log == [("due", 0), ("later", 10)]
    assert cancelled.runs == 0


def test_add_all_of_nothing_is_a_no_op(timer: SystemTimer) -> None:
    timer.add_all([])
    assert timer.size() == 0


@pytest.fixture
def purgatory(clock: MockTime) -> Iterator[DelayedOperationPurgatory[FlagOperation]]:
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "batch", purge_interval=1000, reaper_enabled=False, time=clock
    )
    yield p
    p.shutdown()


def test_watch_all_matches_the_single_form(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    ready = FlagOperation(100)
    ready.ready = True
    a, b, keyless = FlagOperation(100), FlagOperation(50), FlagOperation(30)
    results = purgatory.try_complete_else_watch_all(
        [(ready, ["r"]), (a, ["k1", "k2"]), (b, ("k2",)), (keyless, [])]
    )
    assert results == [True, False, False, False]
    # The satisfied one completed on the spot: not watched, not armed, tried once.
    assert ready.completions == 1 and ready.tries == 1
    assert purgatory.watched() == 3 and purgatory.watched_keys() == 2
    assert purgatory.num_delayed() == 3
    # Kafka's two tries per pending operation, as in the single form.
    assert (a.tries, b.tries, keyless.tries) == (2, 2, 2)
    a.ready = True
    assert purgatory.check_and_complete("k1") == 1
    assert purgatory.num_delayed() == 2
    timer = purgatory.timer
    assert isinstance(timer, SystemTimer)
    step(timer, clock, 30)
    assert keyless.expirations == 1 and b.expirations == 0
    step(timer, clock, 20)
    assert b.expirations == 1 and a.expirations == 0
    assert purgatory.num_delayed() == 0


def test_watch_all_cancels_what_completes_between_watch_and_arm(clock: MockTime) -> None:
    """As in the single form: an operation completed while the batch is armed is not
    left in the wheel."""

    class CompletingTimer(SystemTimer):
        def add_all(self, tasks):  # type: ignore[no-untyped-def]
            tasks = list(tasks)
            super().add_all(tasks)
            tasks[0].force_complete()  # another thread completes the first one meanwhile

    timer = CompletingTimer("ct", time=clock)
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "ct", timer=timer, reaper_enabled=False, time=clock
    )
    try:
        first, second = FlagOperation(100), FlagOperation(100)
        assert p.try_complete_else_watch_all([(first, ["k"]), (second, ["k"])]) == [False, False]
        assert first.is_completed() and not second.is_completed()
        assert p.num_delayed() == 1
    finally:
        p.shutdown()


def test_watch_all_falls_back_to_add_for_other_timers(clock: MockTime) -> None:
    """A timer that only has ``add`` (the Timer protocol) still gets every operation."""
    inner = SystemTimer("plain", time=clock)

    class PlainTimer:
        def __init__(self) -> None:
            self.added: list[object] = []

        def add(self, task: FlagOperation) -> None:
            self.added.append(task)
            inner.add(task)

        def advance_clock(self, timeout_ms: int) -> bool:
            return inner.advance_clock(timeout_ms)

        def size(self) -> int:
            return inner.size()

        def shutdown(self) -> None:
            inner.shutdown()

    plain = PlainTimer()
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "plain", timer=plain, reaper_enabled=False, time=clock
    )
    try:
        ops = [FlagOperation(10) for _ in range(3)]
        results = p.try_complete_else_watch_all([(op, [i]) for i, op in enumerate(ops)])
        assert results == [False, False, False]
        assert plain.added == ops
        assert p.num_delayed() == 3
    finally:
        p.shutdown()


def test_watch_and_arm_all_watches_and_arms_without_trying(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    """The restart path: no tries, but watched and armed exactly like the batch form."""
    a, b, keyless = FlagOperation(100), FlagOperation(50), FlagOperation(30)
    purgatory.watch_and_arm_all([(a, ["k1", "k2"]), (b, ("k2",)), (keyless, [])])
    assert (a.tries, b.tries, keyless.tries) == (0, 0, 0)
    assert purgatory.watched() == 3 and purgatory.watched_keys() == 2
    assert purgatory.num_delayed() == 3
    a.ready = True
    assert purgatory.check_and_complete("k1") == 1
    assert a.completions == 1 and purgatory.num_delayed() == 2
    # a left every key it watched (unwatch on complete); b still watches k2.
    assert purgatory.watched() == 1
    timer = purgatory.timer
    assert isinstance(timer, SystemTimer)
    step(timer, clock, 30)
    assert keyless.expirations == 1 and b.expirations == 0
    step(timer, clock, 20)
    assert b.expirations == 1 and a.expirations == 0
    assert purgatory.num_delayed() == 0 and purgatory.watched() == 0


def test_watch_and_arm_all_due_and_completed_operations(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    """A zero delay expires at once on the executor; an operation completed before it is
    armed is watched nowhere and never armed."""
    due, done = FlagOperation(0), FlagOperation(100)
    done.ready = True
    assert done.safe_try_complete()
    purgatory.watch_and_arm_all([(due, ["k"]), (done, ["k"])])
    timer = purgatory.timer
    assert isinstance(timer, SystemTimer)
    assert timer._wait_executor_idle(10.0)
    assert due.expirations == 1 and done.expirations == 0
    assert purgatory.num_delayed() == 0 and purgatory.watched() == 0
