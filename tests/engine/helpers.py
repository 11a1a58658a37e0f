"""Small task/operation doubles shared by the engine tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from purgatory_server import (
    DelayedOperation,
    DelayedOperationPurgatory,
    MockTime,
    SystemTimer,
    TimerTask,
)


class RecordingTask(TimerTask):
    """Records, on the executor thread, the mock time and thread it ran on."""

    def __init__(self, delay_ms: int, name: object, clock: MockTime, log: list[tuple[object, int]]):
        super().__init__(delay_ms)
        self.name = name
        self.clock = clock
        self.log = log
        self.thread: str | None = None
        self.runs = 0

    def run(self) -> None:
        self.runs += 1
        self.thread = threading.current_thread().name
        self.log.append((self.name, self.clock.hi_res_clock_ms()))


class FlagOperation(DelayedOperation):
    """Completes when ``ready`` is set; counts its callbacks."""

    def __init__(self, delay_ms: int, on_done: Callable[[FlagOperation], None] | None = None):
        super().__init__(delay_ms)
        self.ready = False
        self.completions = 0
        self.expirations = 0
        self.tries = 0
        self.on_done = on_done
        self.completed_on: str | None = None

    def try_complete(self) -> bool:
        self.tries += 1
        if self.ready:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1
        self.completed_on = threading.current_thread().name
        if self.on_done is not None:
            self.on_done(self)

    def on_expiration(self) -> None:
        self.expirations += 1


def step(timer: SystemTimer, clock: MockTime, ms: int) -> None:
    """Advance the mock clock, fire what is due, and wait until it has run."""
    clock.sleep(ms)
    # Each due bucket is drained once per tick; a wheel that keeps reporting work after
    # this many rounds is looping, and should fail rather than hang.
    for _ in range(10_000):
        if not timer.advance_clock(0):
            break
    else:
        raise AssertionError("advance_clock(0) never ran out of due buckets")
    assert timer._wait_executor_idle(10.0), "executor did not drain"


def advance(p: DelayedOperationPurgatory[FlagOperation], clock: MockTime, ms: int) -> None:
    """``step`` the purgatory's timer by ``ms``, then let the purgatory advance (and purge)."""
    timer = p.timer
    assert isinstance(timer, SystemTimer)
    step(timer, clock, ms)
    p.advance_clock(0)
