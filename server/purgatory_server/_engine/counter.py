"""A task counter shared by every bucket of one timer."""

from __future__ import annotations

import itertools
import threading

__all__ = ["OperationEstimate", "TaskCounter"]


class TaskCounter:
    """Count of entries linked into any bucket of a timer (Kafka's shared AtomicInteger).

    Two ``itertools.count`` objects instead of ``n += 1`` under a lock: ``next()`` is one
    C call, atomic under the GIL and cheaper than a lock round. ``get`` advances both
    counts once, leaving their difference unchanged; a concurrent ``get`` sees the value
    before or after an update, never a torn one.
    """

    __slots__ = ("_decrements", "_increments")

    def __init__(self) -> None:
        self._increments = itertools.count()
        self._decrements = itertools.count()

    def increment(self) -> None:
        next(self._increments)

    def decrement(self) -> None:
        next(self._decrements)

    def decrement_by(self, n: int) -> None:
        for _ in range(n):
            next(self._decrements)

    def get(self) -> int:
        return next(self._increments) - next(self._decrements)


class OperationEstimate:
    """Kafka's ``estimatedTotalOperations``: watched operations since the last purge.

    Incremented on every watch (hot, many threads) with a bare ``next()`` as in
    :class:`TaskCounter`; read and reset by the purge check (the reaper) under a lock, with
    an offset so that a read, which itself advances the count, and a reset compose exactly.
    """

    __slots__ = ("_count", "_lock", "_offset")

    def __init__(self) -> None:
        self._count = itertools.count()
        self._lock = threading.Lock()
        self._offset = 0

    def increment(self) -> None:
        next(self._count)

    def get(self) -> int:
        with self._lock:
            raw = next(self._count)
            self._offset += 1  # the read's own step is not an operation
            return raw - (self._offset - 1)

    def set(self, value: int) -> None:
        with self._lock:
            raw = next(self._count)
            # The next read returns raw + 1 + increments; make that value + increments.
            self._offset = raw + 1 - value
