"""A task counter shared by every bucket of one timer."""

from __future__ import annotations

import itertools

__all__ = ["TaskCounter"]


class TaskCounter:
    """Count of entries linked into any bucket of a timer (Kafka's shared AtomicInteger).

    Why two ``itertools.count`` objects instead of ``n += 1`` under a lock: ``next()`` on a
    count is a single C call, so it cannot interleave with another thread's ``next()`` the
    way a Python read-modify-write can, and it costs a fraction of a lock round-trip on the
    insert/cancel hot path. ``get`` advances both counts once, which leaves their difference
    (the value) unchanged. A ``get`` concurrent with an insert or a removal sees the value
    either before or after it, never a torn one.
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
