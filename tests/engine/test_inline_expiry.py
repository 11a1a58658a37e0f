"""SystemTimer(inline_expiry=True): expired tasks run on the thread that advances the clock.

The service's timer uses it to skip the executor hop (docs/benchmarks.md, "Expiry
lateness"). Same firing times as the default, on MockTime with explicit clock steps; only
the thread differs, and tasks already due when added still go to the executor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from purgatory_server import DelayedOperationPurgatory, MockTime, SystemTimer

from .helpers import FlagOperation, RecordingTask


@pytest.fixture
def clock() -> MockTime:
    return MockTime(start_ms=0)


@pytest.fixture
def timer(clock: MockTime) -> Iterator[SystemTimer]:
    t = SystemTimer("inline", tick_ms=1, wheel_size=20, time=clock, inline_expiry=True)
    yield t
    t.shutdown()


def test_expired_tasks_run_on_the_advancing_thread_at_their_due_time(
    timer: SystemTimer, clock: MockTime
) -> None:
    log: list[tuple[object, int]] = []
    delays = [5, 1, 450, 20, 5, 399]
    tasks = [RecordingTask(d, i, clock, log) for i, d in enumerate(delays)]
    timer.add_all(tasks)
    me = threading.current_thread().name
    for _ in range(450):
        clock.sleep(1)
        timer.advance_clock(0)
        # No executor to wait for: everything due has run when advance_clock returns.
        assert all(t.runs == (1 if t.delay_ms <= clock.hi_res_clock_ms() else 0) for t in tasks)
    assert sorted(log, key=lambda e: (e[1], str(e[0]))) == sorted(
        ((i, d) for i, d in enumerate(delays)), key=lambda e: (e[1], str(e[0]))
    )
    assert all(t.thread == me for t in tasks)
    assert timer.size() == 0


def test_cancelled_tasks_are_skipped_and_due_at_add_still_goes_to_the_executor(
    timer: SystemTimer, clock: MockTime
) -> None:
    log: list[tuple[object, int]] = []
    due = RecordingTask(0, "due", clock, log)
    cancelled = RecordingTask(10, "cancelled", clock, log)
    later = RecordingTask(10, "later", clock, log)
    timer.add_all([due, cancelled, later])
    assert timer._wait_executor_idle(10.0)
    assert log == [("due", 0)] and due.thread == "executor-inline"  # never the adder
    cancelled.cancel()
    clock.sleep(10)
    timer.advance_clock(0)
    assert log == [("due", 0), ("later", 10)] and cancelled.runs == 0
    assert later.thread == threading.current_thread().name


class _Failing(RecordingTask):
    def run(self) -> None:
        super().run()
        raise RuntimeError("boom")


def test_a_failing_task_is_logged_and_the_rest_still_run(
    timer: SystemTimer, clock: MockTime, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[tuple[object, int]] = []
    timer.add_all([_Failing(3, "bad", clock, log), RecordingTask(3, "good", clock, log)])
    clock.sleep(3)
    with caplog.at_level(logging.ERROR, logger="purgatory_server.timer"):
        assert timer.advance_clock(0)
    assert sorted(name for name, _ in log) == ["bad", "good"]
    assert "raised" in caplog.text


def test_purgatory_on_an_inline_timer_expires_operations_on_the_caller(clock: MockTime) -> None:
    timer = SystemTimer("p", tick_ms=1, wheel_size=20, time=clock, inline_expiry=True)
    purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "p", timer=timer, reaper_enabled=False, time=clock
    )
    try:
        op = FlagOperation(30)
        assert not purgatory.try_complete_else_watch(op, ["k"])
        clock.sleep(29)
        purgatory.advance_clock(0)
        assert op.expirations == 0 and purgatory.watched() == 1
        clock.sleep(1)
        purgatory.advance_clock(0)
        assert op.expirations == 1 and op.completions == 1
        assert op.completed_on == threading.current_thread().name
        assert purgatory.num_delayed() == 0 and purgatory.watched() == 0
    finally:
        purgatory.shutdown()


def test_nothing_runs_after_shutdown(clock: MockTime) -> None:
    timer = SystemTimer("sd", tick_ms=1, wheel_size=20, time=clock, inline_expiry=True)
    log: list[tuple[object, int]] = []
    timer.add_all([RecordingTask(5, "late", clock, log)])
    timer.shutdown()
    clock.sleep(5)
    timer.advance_clock(0)
    assert log == []
