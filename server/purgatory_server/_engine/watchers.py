"""Watchers: the operations waiting on one key, and the sharded map that holds them."""

from __future__ import annotations

import threading
from collections.abc import Hashable

from purgatory_server._engine.delayed_operation import DelayedOperation

__all__ = ["WatcherShard", "Watchers"]


class Watchers:
    """Operations watching one key, in insertion order: a key's entry once a second
    operation watches it (see :class:`WatcherShard`).

    Keyed by :func:`identity`, so removal is O(1) and an operation that defines ``__eq__``
    can still be watched. All mutation happens under the owning shard's lock.
    """

    __slots__ = ("ops",)

    def __init__(self, first: DelayedOperation) -> None:
        self.ops: dict[Hashable, DelayedOperation] = {identity(first): first}


_OBJECT_HASH = object.__hash__
_OBJECT_EQ = object.__eq__


def identity(op: DelayedOperation) -> Hashable:
    """The operation's key in a :class:`Watchers` map: itself where its hash and equality
    are object identity (the usual case), else ``id(op)``.

    Why not always ``id(op)``: that is an extra int object per watch entry.
    """
    cls = type(op)
    by_itself = _KEYED_BY_ITSELF.get(cls)
    if by_itself is None:
        by_itself = cls.__hash__ is _OBJECT_HASH and cls.__eq__ is _OBJECT_EQ
        _KEYED_BY_ITSELF[cls] = by_itself
    return op if by_itself else id(op)


# identity()'s answer per operation class, fixed when its first operation is watched.
# Racy writes under the GIL are harmless (same answer). Keeps each class alive.
_KEYED_BY_ITSELF: dict[type, bool] = {}


class WatcherShard:
    """One lock and the key -> entry map it guards.

    A key's entry is its operation while it is the only one, and a :class:`Watchers`
    from the second on (most keys have one watcher; a Watchers that shrinks back to one
    stays one). Sharding keeps one hot key from serializing the others; ``count`` (watch
    entries held) makes ``watched()`` O(shards).

    Hot paths take the lock with ``acquire()``/``finally: release()`` rather than
    ``with``, which is cheaper (docs/benchmarks.md); the other engine modules do the same.
    """

    __slots__ = ("_acquire", "_release", "count", "lock", "watchers")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._acquire = self.lock.acquire
        self._release = self.lock.release
        self.watchers: dict[Hashable, DelayedOperation | Watchers] = {}
        self.count = 0

    def watch(self, key: Hashable, op: DelayedOperation) -> None:
        self._acquire()
        try:
            entry = self.watchers.get(key)
            if entry is None:
                self.watchers[key] = op
                self.count += 1
            elif isinstance(entry, Watchers):
                d = entry.ops
                n = len(d)
                d[identity(op)] = op
                self.count += len(d) - n
            elif entry is not op:  # a second operation (the same one again: no change)
                w = self.watchers[key] = Watchers(entry)
                w.ops[identity(op)] = op
                self.count += 1
        finally:
            self._release()

    def remove(self, key: Hashable, op: DelayedOperation) -> None:
        """Drop ``op`` from ``key``'s entry, and the entry if it is left empty."""
        self._acquire()
        try:
            entry = self.watchers.get(key)
            if entry is None:
                return
            if isinstance(entry, Watchers):
                d = entry.ops
                if d.pop(identity(op), None) is not None:
                    self.count -= 1
                    if not d:
                        del self.watchers[key]
            elif entry is op:
                del self.watchers[key]
                self.count -= 1
        finally:
            self._release()

    def snapshot(self, key: Hashable) -> list[DelayedOperation]:
        """The operations watching ``key`` now, in the order they came (a copy)."""
        self.lock.acquire()
        try:
            entry = self.watchers.get(key)
            if entry is None:
                return []
            if isinstance(entry, Watchers):
                return list(entry.ops.values())
            return [entry]
        finally:
            self.lock.release()

    def discard(self, key: Hashable, ops: list[DelayedOperation]) -> None:
        """Remove ``ops`` (completed ones) from ``key``'s entry as it is now, which may
        have changed since :meth:`snapshot`; drop the entry if it is left empty."""
        self.lock.acquire()
        try:
            entry = self.watchers.get(key)
            if entry is None:
                return
            if isinstance(entry, Watchers):
                d = entry.ops
                n = len(d)
                for op in ops:
                    d.pop(identity(op), None)
                self.count -= n - len(d)
                if not d:
                    del self.watchers[key]
            else:
                for op in ops:
                    if op is entry:
                        del self.watchers[key]
                        self.count -= 1
                        break
        finally:
            self.lock.release()

    def pop_key(self, key: Hashable) -> list[DelayedOperation]:
        with self.lock:
            entry = self.watchers.pop(key, None)
            if entry is None:
                return []
            if isinstance(entry, Watchers):
                self.count -= len(entry.ops)
                return list(entry.ops.values())
            self.count -= 1
            return [entry]

    def purge_completed(self) -> int:
        """Drop completed operations from every key; drop keys left empty."""
        purged = 0
        with self.lock:
            watchers = self.watchers
            empty: list[Hashable] = []
            for key, entry in watchers.items():
                if not isinstance(entry, Watchers):
                    if entry._completed.locked():
                        purged += 1
                        empty.append(key)
                    continue
                ops = entry.ops
                # `_completed.locked()`: is_completed() without the method call.
                live = {i: op for i, op in ops.items() if not op._completed.locked()}
                if len(live) != len(ops):
                    purged += len(ops) - len(live)
                    entry.ops = live
                    if not live:
                        empty.append(key)
            for key in empty:
                del watchers[key]
            self.count -= purged
        return purged

    def keys(self) -> int:
        with self.lock:
            return len(self.watchers)

    def has(self, key: Hashable) -> bool:
        with self.lock:
            return key in self.watchers
