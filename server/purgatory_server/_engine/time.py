"""Clocks the engine reads.

Every timer deadline is computed from an injected :class:`Time`, never from the module
``time`` directly, so tests can drive the wheel with :class:`MockTime` and advance it
explicitly instead of sleeping.

The production clock is monotonic: a wall-clock step must never make a wheel of
operations fire early or stall. Wall-clock time is only for records (journals, event
timestamps), hence a separate method.
"""

from __future__ import annotations

import threading
import time as _time
from typing import Protocol

from purgatory_server._engine._native import mypyc_attr

__all__ = ["MockTime", "SystemTime", "Time"]


class Time(Protocol):
    """The clock the timer, delay queue and purgatory share."""

    def hi_res_clock_ms(self) -> int:
        """Monotonic milliseconds: the timeline every expiration is measured on."""
        ...

    def nanoseconds(self) -> int:
        """Monotonic nanoseconds on the same timeline as :meth:`hi_res_clock_ms`."""
        ...

    def wall_clock_ms(self) -> int:
        """Milliseconds since the Unix epoch; for records only, never for deadlines."""
        ...

    def sleep(self, ms: int) -> None:
        """Let ``ms`` milliseconds pass."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)
class SystemTime:
    """The production clock: monotonic for deadlines, wall clock for records."""

    __slots__ = ()

    def hi_res_clock_ms(self) -> int:
        return _time.monotonic_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()

    def wall_clock_ms(self) -> int:
        return _time.time_ns() // 1_000_000

    def sleep(self, ms: int) -> None:
        _time.sleep(ms / 1000.0)


SYSTEM_TIME = SystemTime()


@mypyc_attr(allow_interpreted_subclasses=True)
class MockTime:
    """A clock that moves only when told to.

    ``sleep(ms)`` advances it by ``ms`` at once and returns without waiting, so
    ``clock.sleep(d); timer.advance_clock(0)`` deterministically fires everything due by
    then. Thread-safe: the reaper, the executor and the test thread may all read it.
    """

    __slots__ = ("_lock", "_nanos", "_wall_offset_ms")

    def __init__(self, start_ms: int = 0, wall_clock_start_ms: int = 1_700_000_000_000) -> None:
        if start_ms < 0:
            raise ValueError(f"start_ms must be >= 0, got {start_ms}")
        self._lock = threading.Lock()
        self._nanos = start_ms * 1_000_000
        self._wall_offset_ms = wall_clock_start_ms - start_ms

    def hi_res_clock_ms(self) -> int:
        return self._nanos // 1_000_000

    def nanoseconds(self) -> int:
        return self._nanos

    def wall_clock_ms(self) -> int:
        return self._wall_offset_ms + self._nanos // 1_000_000

    def sleep(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"cannot sleep a negative time: {ms} ms")
        with self._lock:
            self._nanos += ms * 1_000_000
