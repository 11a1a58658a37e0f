"""Watchers: the operations waiting on one key, and the sharded map that holds them."""

from __future__ import annotations

import threading
from collections.abc import Hashable

from purgatory_server._engine.delayed_operation import DelayedOperation

__all__ = ["WatcherShard", "Watchers"]


class Watchers:
    """Operations watching ``key``, in insertion order, keyed by identity.

    Keyed by identity (:func:`identity`) so that removal is O(1) and an operation
    subclass that defines ``__eq__`` (a dataclass, say) can still be watched. All mutation
    happens under the owning shard's lock.
    """

    __slots__ = ("key", "ops")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.ops: dict[Hashable, DelayedOperation] = {}


_OBJECT_HASH = object.__hash__
_OBJECT_EQ = object.__eq__


def identity(op: DelayedOperation) -> Hashable:
    """The operation's key in a :class:`Watchers` map: itself where its hash and equality
    are object identity (the usual case), else ``id(op)``.

    Why not always ``id(op)``: the id is an int object of its own (32 bytes) per watched
    key per pending operation, while the operation is already there as the value.
    """
    cls = type(op)
    by_itself = _KEYED_BY_ITSELF.get(cls)
    if by_itself is None:
        by_itself = cls.__hash__ is _OBJECT_HASH and cls.__eq__ is _OBJECT_EQ
        _KEYED_BY_ITSELF[cls] = by_itself
    return op if by_itself else id(op)


# identity()'s answer per operation class: one dict lookup per watch and per removal
# instead of two attribute lookups on the class. A class's ``__hash__``/``__eq__`` are
# taken as they were when its first operation was watched (a class is not expected to
# change them afterwards). Written under the GIL by whichever thread gets there first;
# two threads computing the same answer at once is harmless. It keeps each class alive for
# the life of the process (operation classes are module-level in practice).
_KEYED_BY_ITSELF: dict[type, bool] = {}


class WatcherShard:
    """One lock and the key -> Watchers map it guards.

    Sharding keeps one hot key from serializing every other key's watch and check. The
    shard also keeps the count of watch entries it holds, so ``watched()`` costs
    O(shards) instead of O(operations).

    The hot methods take the lock with ``acquire()`` and a ``finally: release()`` rather
    than ``with``: the lock's ``__enter__``/``__exit__`` are found on its type and take
    their arguments as a tuple, about three times the cost of the two plain calls, and a
    request makes about ten lock rounds in the engine (docs/benchmarks.md §14, "Engine
    CPU per request at 50,000/s"). The other engine modules do the same on hot paths.
    ``watch`` and ``remove`` call the lock's methods bound once in ``__init__``, which
    skips a method lookup per call (about 40 ns of a 300 ns watch) for 2 x 72 bytes per
    shard (74 KB per purgatory at the default 512 shards).
    """

    __slots__ = ("_acquire", "_release", "count", "lock", "watchers")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._acquire = self.lock.acquire
        self._release = self.lock.release
        self.watchers: dict[Hashable, Watchers] = {}
        self.count = 0

    def watch(self, key: Hashable, op: DelayedOperation) -> None:
        self._acquire()
        try:
            w = self.watchers.get(key)
            if w is None:
                w = self.watchers[key] = Watchers(key)
            n = len(w.ops)
            w.ops[identity(op)] = op
            self.count += len(w.ops) - n
        finally:
            self._release()

    def remove(self, key: Hashable, op: DelayedOperation) -> None:
        """Drop ``op`` from ``key``'s list, and the list if it is left empty."""
        self._acquire()
        try:
            w = self.watchers.get(key)
            if w is None:
                return
            d = w.ops
            if d.pop(identity(op), None) is not None:
                self.count -= 1
                if not d:
                    del self.watchers[key]
        finally:
            self._release()

    def snapshot(self, key: Hashable) -> tuple[Watchers | None, list[DelayedOperation]]:
        self.lock.acquire()
        try:
            w = self.watchers.get(key)
            if w is None:
                return None, []
            return w, list(w.ops.values())
        finally:
            self.lock.release()

    def discard(self, w: Watchers, ops: list[DelayedOperation]) -> None:
        """Remove ``ops`` from ``w``; drop ``w`` from the map if it is now empty."""
        self.lock.acquire()
        try:
            d = w.ops
            n = len(d)
            for op in ops:
                d.pop(identity(op), None)
            self.count -= n - len(d)
            if not d and self.watchers.get(w.key) is w:
                del self.watchers[w.key]
        finally:
            self.lock.release()

    def pop_key(self, key: Hashable) -> list[DelayedOperation]:
        with self.lock:
            w = self.watchers.pop(key, None)
            if w is None:
                return []
            self.count -= len(w.ops)
            return list(w.ops.values())

    def purge_completed(self) -> int:
        """Drop completed operations from every key; drop keys left empty."""
        purged = 0
        with self.lock:
            watchers = self.watchers
            empty: list[Hashable] = []
            for key, w in watchers.items():
                ops = w.ops
                # One pass that keeps the live ones; `_completed.locked()` is
                # is_completed() without the method call (this loop visits every entry).
                live = {i: op for i, op in ops.items() if not op._completed.locked()}
                if len(live) != len(ops):
                    purged += len(ops) - len(live)
                    w.ops = live
                    if not live:
                        empty.append(key)
            for key in empty:
                del watchers[key]
            self.count -= purged
        return purged

    def keys(self) -> int:
        with self.lock:
            return len(self.watchers)
