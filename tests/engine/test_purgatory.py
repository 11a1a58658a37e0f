"""DelayedOperation and DelayedOperationPurgatory on MockTime, reaper disabled.

These tests pin Kafka's lazy watch-list semantics (``unwatch_on_complete=False``): a
completed operation stays listed until its key is checked or a purge runs. The default,
prompt removal, is tested in ``test_unwatch.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from purgatory_server import DelayedOperationPurgatory, MockTime, SystemTimer

from .helpers import FlagOperation, advance


@pytest.fixture
def clock() -> MockTime:
    return MockTime(start_ms=0)


@pytest.fixture
def purgatory(clock: MockTime) -> Iterator[DelayedOperationPurgatory[FlagOperation]]:
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "test", purge_interval=1000, reaper_enabled=False, time=clock, unwatch_on_complete=False
    )
    yield p
    p.shutdown()


def test_completes_immediately_when_already_satisfied(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    op = FlagOperation(100)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.completions == 1 and op.is_completed()
    assert purgatory.watched() == 0
    assert purgatory.num_delayed() == 0


def test_satisfied_by_check_and_complete(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    op1, op2 = FlagOperation(100), FlagOperation(100)
    assert purgatory.try_complete_else_watch(op1, ["a", "b"]) is False
    assert purgatory.try_complete_else_watch(op2, ["b"]) is False
    assert purgatory.watched() == 3
    assert purgatory.num_delayed() == 2
    assert purgatory.check_and_complete("a") == 0  # nothing is ready yet
    op1.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert op1.completions == 1 and op1.completed_on == threading.current_thread().name
    # Completion cancels the timer task at once; the "b" entry stays until "b" is checked.
    assert purgatory.num_delayed() == 1
    assert purgatory.watched() == 2
    assert purgatory.check_and_complete("b") == 0
    assert purgatory.watched() == 1  # op1 purged from "b" because "b" was checked
    op2.ready = True
    assert purgatory.check_and_complete("b") == 1
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0
    advance(purgatory, clock, 200)
    assert op1.expirations == 0 and op2.expirations == 0


def test_expiry(purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime) -> None:
    op = FlagOperation(50)
    purgatory.try_complete_else_watch(op, ["k"])
    advance(purgatory, clock, 49)
    assert not op.is_completed()
    advance(purgatory, clock, 1)
    assert op.is_completed()
    assert (op.completions, op.expirations) == (1, 1)
    assert op.completed_on == "executor-test"
    assert purgatory.num_delayed() == 0
    # The expired op is still listed under "k" until the key is checked or purged.
    assert purgatory.watched() == 1
    assert purgatory.check_and_complete("k") == 0
    assert purgatory.watched() == 0


def test_force_complete_wins_once(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    op = FlagOperation(50)
    purgatory.try_complete_else_watch(op, ["k"])
    assert op.force_complete() is True
    assert op.force_complete() is False
    op.ready = True
    assert purgatory.check_and_complete("k") == 0
    advance(purgatory, clock, 100)
    assert (op.completions, op.expirations) == (1, 0)


def test_keyless_operation_is_a_pure_timer(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    op = FlagOperation(30)
    assert purgatory.try_complete_else_watch(op, []) is False
    assert purgatory.watched() == 0 and purgatory.num_delayed() == 1
    advance(purgatory, clock, 30)
    assert op.expirations == 1


def test_keys_may_be_any_hashable(purgatory: DelayedOperationPurgatory[FlagOperation]) -> None:
    op = FlagOperation(100)
    keys = [("topic", 3), 42, frozenset({"x"}), "s"]
    purgatory.try_complete_else_watch(op, keys)
    assert purgatory.watched() == 4
    op.ready = True
    assert purgatory.check_and_complete(("topic", 3)) == 1


def test_duplicate_keys_watch_once(purgatory: DelayedOperationPurgatory[FlagOperation]) -> None:
    op = FlagOperation(100)
    purgatory.try_complete_else_watch(op, ["k", "k"])
    assert purgatory.watched() == 1


def test_cancel_for_key(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    ops = [FlagOperation(100) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k", "other"])
    ops[0].force_complete()
    cancelled = purgatory.cancel_for_key("k")
    assert cancelled == ops[1:]
    assert purgatory.num_delayed() == 0  # their timers were cancelled
    assert purgatory.cancel_for_key("k") == []
    advance(purgatory, clock, 200)
    assert all(op.expirations == 0 for op in ops)
    assert not ops[1].is_completed()


def test_purge_runs_when_estimate_exceeds_interval(clock: MockTime) -> None:
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "purge", purge_interval=10, reaper_enabled=False, time=clock, unwatch_on_complete=False
    )
    try:
        ops = [FlagOperation(1000) for _ in range(25)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [f"k{i}", "shared"])
        assert p.watched() == 50
        for op in ops[:20]:
            op.force_complete()
        assert p.num_delayed() == 5
        # Nothing checks those keys; only the purge can drop the 20 completed ops.
        assert p.watched() == 50
        p.advance_clock(0)  # estimate 25 - delayed 5 = 20 > 10: purge
        assert p.watched() == 10
        assert p.watched_keys() == 6  # k20..k24 and "shared"
        for op in ops[20:]:
            op.force_complete()
        p.advance_clock(0)  # estimate reset to 5; 5 - 0 is not > 10: no purge yet
        assert p.watched() == 10
    finally:
        p.shutdown()


def test_safe_try_complete_or_else_closes_the_watch_race(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    """The condition turns true while the watch is installed: the second try sees it."""

    class Racy(FlagOperation):
        def try_complete(self) -> bool:
            self.tries += 1
            if self.tries == 2:  # true only from the second try on
                return self.force_complete()
            return False

    op = Racy(100)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.tries == 2 and op.completions == 1
    assert purgatory.num_delayed() == 0  # never armed


def test_completion_between_watch_and_arm_cancels_the_timer(clock: MockTime) -> None:
    """Kafka's check after timer.add: an op completed concurrently is not left armed."""

    class CompletingTimer(SystemTimer):
        def add(self, task):  # type: ignore[no-untyped-def]
            super().add(task)
            task.force_complete()  # another thread completes it right after arming

    timer = CompletingTimer("ct", time=clock)
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "ct", timer=timer, reaper_enabled=False, time=clock
    )
    try:
        op = FlagOperation(100)
        assert p.try_complete_else_watch(op, ["k"]) is False
        assert op.is_completed() and p.num_delayed() == 0
    finally:
        p.shutdown()


def test_delayed_operation_run_expires_once() -> None:
    op = FlagOperation(10)
    op.run()
    op.run()
    assert (op.completions, op.expirations) == (1, 1)
    assert op.is_cancelled()


def test_shutdown_discards_pending_and_stops_threads(clock: MockTime) -> None:
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "sd", reaper_enabled=True, time=clock
    )
    ops = [FlagOperation(10) for _ in range(10)]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    p.shutdown(timeout_s=5.0)
    names = {t.name for t in threading.enumerate()}
    assert "ExpirationReaper-sd" not in names
    assert "executor-sd" not in names
    clock.sleep(100)
    p.timer.advance_clock(0)
    assert all(op.expirations == 0 for op in ops)
