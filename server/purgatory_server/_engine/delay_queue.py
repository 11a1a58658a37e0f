"""DelayQueue: buckets ordered by expiration, handed out when due.

Holding buckets rather than tasks keeps the O(log n) heap off the per-task path: at most
one insertion per bucket per tick, however many tasks are added.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time as _time
from collections.abc import Callable

from purgatory_server._engine.time import Time
from purgatory_server._engine.timer_task_list import TimerTaskList

__all__ = ["DelayQueue"]


class DelayQueue:
    """A min-heap of buckets keyed by the expiration they had when offered.

    Invariant: a bucket is in the heap at most once. It is offered only when its
    expiration changes (from -1, after a flush), and it is removed by ``poll`` before it
    is flushed, both under the owning timer's lock.

    Due-ness is judged on the injected :class:`Time`; *how long to block* in ``poll`` is
    real time, so with ``MockTime`` a blocked ``poll`` returns after at most ``timeout_ms``
    real ms instead of hanging on a clock nobody advances.
    """

    __slots__ = ("_closed", "_cond", "_heap", "_on_head", "_seq", "_time")

    def __init__(self, time: Time, on_head: Callable[[int], None] | None = None) -> None:
        self._time = time
        # Told each offered bucket's expiration that becomes the head (a shared reaper's
        # wake-up, see .reaper); called under this queue's lock.
        self._on_head = on_head
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        # Tie-breaker so the heap never compares two buckets.
        self._seq = itertools.count()
        self._closed = False

    def offer(self, bucket: TimerTaskList) -> None:
        with self._cond:
            heapq.heappush(self._heap, (bucket.expiration, next(self._seq), bucket))
            # Wake a blocked poll only when the head changed (its wait is sized to the old
            # head). Compare the bucket, never the tuple: mypyc boxes a typed tuple afresh,
            # so tuple identity never holds. The invariant above makes this enough.
            if self._heap[0][2] is bucket:
                self._cond.notify()
                on_head = self._on_head
                if on_head is not None:
                    on_head(bucket.expiration)

    def head(self) -> int:
        """The earliest bucket's expiration in ms; -1 when there is none."""
        with self._cond:
            heap = self._heap
            return heap[0][0] if heap else -1

    def _pop_due(self) -> TimerTaskList | None:
        heap = self._heap
        if heap and heap[0][0] <= self._time.hi_res_clock_ms():
            return heapq.heappop(heap)[2]
        return None

    def poll(self, timeout_ms: int = 0) -> TimerTaskList | None:
        """The earliest due bucket, waiting up to ``timeout_ms`` for one; None if none."""
        with self._cond:
            bucket = self._pop_due()
            if bucket is not None or timeout_ms <= 0 or self._closed:
                return bucket
            deadline = _time.monotonic() + timeout_ms / 1000.0
            while not self._closed:
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    return None
                if self._heap:
                    until_head = (self._heap[0][0] * 1_000_000 - self._time.nanoseconds()) / 1e9
                    remaining = min(remaining, max(until_head, 0.0))
                self._cond.wait(remaining)
                bucket = self._pop_due()
                if bucket is not None:
                    return bucket
            return None

    def close(self) -> None:
        """Wake every blocked ``poll``; later polls with a timeout return at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)
