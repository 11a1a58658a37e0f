"""TimingWheel: one level of Kafka's hierarchical timing wheel.

A wheel has ``wheel_size`` buckets, each covering ``tick_ms``; together they span
``interval = tick_ms * wheel_size`` starting at ``current_time`` (always a multiple of
``tick_ms``). An entry due beyond that span goes to an overflow wheel whose tick is this
wheel's interval, created on first need. Buckets are reused: the bucket for a tick that
has passed serves the tick one revolution later, which is safe because the reaper flushes
a bucket (under the timer lock) before the wheel's ``current_time`` moves past it.

Example (tick 1 ms, 20 slots, start 0): a task due at 450 ms lands in the third wheel
(tick 400 ms); at 400 ms its bucket is flushed and it cascades into the second wheel's
bucket for [440, 460), at 440 ms into the first wheel's bucket for 450, and runs at 450.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._engine.counter import TaskCounter
from purgatory_server._engine.timer_task_list import TimerTaskList

if TYPE_CHECKING:
    from purgatory_server._engine.delay_queue import DelayQueue
    from purgatory_server._engine.timer_task import TimerTaskEntry

__all__ = ["TimingWheel"]


@mypyc_attr(allow_interpreted_subclasses=True)
class TimingWheel:
    """One level of the wheel.

    Not thread-safe by itself: :class:`~purgatory_server._engine.system_timer.SystemTimer`
    serializes ``add`` and ``advance_clock`` under its lock. Only ``cancel`` (a bucket
    ``remove``) runs concurrently, and buckets lock for that.
    """

    __slots__ = (
        "_buckets",
        "_overflow_wheel",
        "_queue",
        "_task_counter",
        "current_time",
        "interval",
        "start_ms",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        task_counter: TaskCounter,
        queue: DelayQueue,
    ) -> None:
        if tick_ms <= 0:
            raise ValueError(f"tick_ms must be positive, got {tick_ms}")
        if wheel_size <= 1:
            raise ValueError(f"wheel_size must be at least 2, got {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.start_ms = start_ms
        self.interval = tick_ms * wheel_size
        self._task_counter = task_counter
        self._queue = queue
        self._buckets = [TimerTaskList(task_counter) for _ in range(wheel_size)]
        # Rounded down to a tick so that bucket boundaries line up across levels.
        self.current_time = start_ms - (start_ms % tick_ms)
        self._overflow_wheel: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        return self._overflow_wheel

    def bucket(self, index: int) -> TimerTaskList:
        return self._buckets[index]

    def _add_overflow_wheel(self) -> TimingWheel:
        wheel = self._overflow_wheel
        if wheel is None:
            wheel = TimingWheel(
                tick_ms=self.interval,
                wheel_size=self.wheel_size,
                start_ms=self.current_time,
                task_counter=self._task_counter,
                queue=self._queue,
            )
            self._overflow_wheel = wheel
        return wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place ``entry`` in a bucket; False if it is cancelled or already due.

        The caller runs a due entry and drops a cancelled one.
        """
        task = entry.timer_task
        # entry.cancelled, inlined: this runs for every add and every cascade.
        if task is None or task._cancelled or task._entry is not entry:
            return False
        expiration = entry.expiration_ms
        wheel = self
        if expiration < wheel.current_time + wheel.tick_ms:
            return False
        while expiration >= wheel.current_time + wheel.interval:
            wheel = wheel._add_overflow_wheel()
        virtual_id = expiration // wheel.tick_ms
        bucket = wheel._buckets[virtual_id % wheel.wheel_size]
        bucket.add(entry)
        # Queue the bucket only when its expiration changes: a bucket already queued for
        # this tick must not be queued twice.
        if bucket.set_expiration(virtual_id * wheel.tick_ms):
            wheel._queue.offer(bucket)
        return True

    def advance_clock(self, time_ms: int) -> None:
        """Move ``current_time`` to the tick containing ``time_ms``, cascading upward."""
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel.current_time + wheel.tick_ms:
            wheel.current_time = time_ms - (time_ms % wheel.tick_ms)
            time_ms = wheel.current_time
            wheel = wheel._overflow_wheel
