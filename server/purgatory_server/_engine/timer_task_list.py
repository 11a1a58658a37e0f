"""TimerTaskList: one bucket of a timing wheel.

A circular doubly linked list with a sentinel (``root``), so linking and unlinking never
special-case the ends. All entries in a bucket share one expiration slot; the bucket, not
the entry, is what the delay queue orders.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._engine.counter import TaskCounter
from purgatory_server._engine.timer_task import TimerTask, TimerTaskEntry

__all__ = ["TimerTaskList"]


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTaskList:
    """A bucket of entries that expire in the same tick of one wheel.

    Thread safety: ``remove`` may run from any thread (it is how ``cancel`` works) and
    races with ``add`` and ``flush``; all three hold the bucket's lock while they touch
    links. ``add`` and ``flush`` themselves are only called by the owning
    :class:`~purgatory_server._engine.system_timer.SystemTimer` under its lock, so two adds
    of the same entry never race (that is why, unlike Kafka, entries carry no lock of
    their own). ``set_expiration`` is likewise called only under that lock.
    """

    __slots__ = ("_acquire", "_expiration", "_lock", "_release", "_task_counter", "root")

    def __init__(self, task_counter: TaskCounter) -> None:
        self._task_counter = task_counter
        self._lock = threading.Lock()
        # Bound once: see WatcherShard.
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._expiration = -1
        root = TimerTaskEntry(None, -1)
        root.next = root
        root.prev = root
        self.root = root

    @property
    def expiration(self) -> int:
        """The bucket's expiration in ms, or -1 when it is empty and not queued."""
        return self._expiration

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the expiration; True if it changed.

        A bucket is queued in the delay queue only when its expiration changes: a change
        means the bucket was empty (flushed, expiration -1) and now serves a new tick.
        """
        changed = self._expiration != expiration_ms
        self._expiration = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        """Link ``entry`` at the tail, first unlinking it from any other list."""
        while True:
            if entry.list is not None:
                entry.remove()
            self._acquire()
            try:
                if entry.list is None:
                    root = self.root
                    tail = root.prev
                    assert tail is not None
                    entry.next = root
                    entry.prev = tail
                    entry.list = self
                    tail.next = entry
                    root.prev = entry
                    self._task_counter.increment()
                    return
            finally:
                self._release()
            # Another thread linked it somewhere between our remove and our lock: retry.

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink ``entry`` if it is (still) in this list; otherwise do nothing."""
        self._acquire()
        try:
            if entry.list is self:
                nxt = entry.next
                prv = entry.prev
                assert nxt is not None and prv is not None
                nxt.prev = prv
                prv.next = nxt
                entry.next = None
                entry.prev = None
                entry.list = None
                self._task_counter.decrement()
        finally:
            self._release()

    def flush(self) -> list[TimerTaskEntry]:
        """Detach every entry, reset the expiration to -1 and return the entries.

        Unlike Kafka, the caller re-inserts the entries after the lock is released, so
        bucket locks never nest. An entry cancelled between detach and re-insert is in no
        list, but its task is flagged and the re-insert drops it.
        """
        entries: list[TimerTaskEntry] = []
        self._acquire()
        try:
            root = self.root
            node = root.next
            while node is not root:
                assert node is not None
                nxt = node.next
                node.next = None
                node.prev = None
                node.list = None
                entries.append(node)
                node = nxt
            root.next = root
            root.prev = root
            self._expiration = -1
            self._task_counter.decrement_by(len(entries))
        finally:
            self._release()
        return entries

    def foreach(self, f: Callable[[TimerTask], None]) -> None:
        """Apply ``f`` to every live task, outside the lock (on a snapshot)."""
        tasks: list[TimerTask] = []
        with self._lock:
            node = self.root.next
            while node is not self.root:
                assert node is not None
                if not node.cancelled and node.timer_task is not None:
                    tasks.append(node.timer_task)
                node = node.next
        for task in tasks:
            f(task)

    def __len__(self) -> int:
        n = 0
        with self._lock:
            node = self.root.next
            while node is not self.root:
                assert node is not None
                n += 1
                node = node.next
        return n
