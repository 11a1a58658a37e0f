"""Property: the wheel fires exactly what a trivial reference model says, step by step.

The model is a dict of task -> due time. After each clock step, the tasks the timer has
run since the previous step must be exactly those due by now, not cancelled, and not run
before: none early, none late by a step, none twice.

tick_ms is 1, as in Kafka. (With a coarser tick an entry runs at the start of its tick,
up to tick_ms - 1 early; that is the wheel's documented resolution, not a bug, so the
model would have to round.) The wheel size varies so that small wheels exercise deep
overflow cascades.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from purgatory_server import MockTime, SystemTimer

from .helpers import RecordingTask, step

add = st.tuples(st.just("add"), st.integers(min_value=1, max_value=3000))
cancel = st.tuples(st.just("cancel"), st.integers(min_value=0, max_value=10_000))
advance = st.tuples(st.just("advance"), st.integers(min_value=0, max_value=400))
actions = st.lists(st.one_of(add, add, cancel, advance), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    wheel_size=st.integers(min_value=2, max_value=20),
    start_ms=st.integers(min_value=0, max_value=10_000),
    schedule=actions,
)
def test_wheel_matches_reference_model(
    wheel_size: int, start_ms: int, schedule: list[tuple[str, int]]
) -> None:
    clock = MockTime(start_ms=start_ms)
    timer = SystemTimer("prop", tick_ms=1, wheel_size=wheel_size, time=clock)
    log: list[tuple[object, int]] = []
    tasks: list[RecordingTask] = []
    due: dict[int, int] = {}
    cancelled: set[int] = set()
    fired: set[int] = set()
    try:

        def check_step() -> None:
            now = clock.hi_res_clock_ms()
            new = [name for name, _ in log]
            log.clear()
            assert len(new) == len(set(new)), "a task ran twice in one step"
            got = set(new)
            assert got.isdisjoint(fired), "a task ran twice"
            expected = {
                i for i, d in due.items() if d <= now and i not in cancelled and i not in fired
            }
            assert got == expected, f"at {now}: ran {sorted(got)}, expected {sorted(expected)}"  # type: ignore[type-var]
            fired.update(got)  # type: ignore[arg-type]

        for kind, value in schedule:
            if kind == "add":
                i = len(tasks)
                task = RecordingTask(value, i, clock, log)
                tasks.append(task)
                due[i] = clock.hi_res_clock_ms() + value
                timer.add(task)
            elif kind == "cancel" and tasks:
                i = value % len(tasks)
                tasks[i].cancel()
                if i not in fired:
                    cancelled.add(i)
            elif kind == "advance":
                step(timer, clock, value)
                check_step()
        # Run everything out: what is left must fire, each once, nothing cancelled.
        step(timer, clock, 3001)
        check_step()
        assert timer.size() == 0
        assert fired == set(due) - cancelled
        assert all(tasks[i].runs == 1 for i in fired)
    finally:
        timer.shutdown()
