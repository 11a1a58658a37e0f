"""TimerTask and TimerTaskEntry: a scheduled action and its node in a bucket.

A task is bound to at most one entry at a time and an entry sits in at most one
:class:`~purgatory_server._engine.timer_task_list.TimerTaskList`. When the reaper moves an
entry from a coarse bucket to a finer one (or runs it), a concurrent ``cancel`` may be
looking at the old bucket: ``TimerTaskEntry.remove`` re-reads ``entry.list`` after every
attempt so it chases the entry to wherever it went, instead of locking the whole wheel.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import TYPE_CHECKING

from purgatory_server._engine._native import mypyc_attr

if TYPE_CHECKING:
    from purgatory_server._engine.timer_task_list import TimerTaskList

__all__ = ["TimerTask", "TimerTaskEntry"]


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTask(metaclass=ABCMeta):
    """Something to run once ``delay_ms`` has passed since it was added to a timer.

    Thread safety: ``cancel`` may be called from any thread at any time, including while
    the reaper is moving the task between buckets; a task cancelled before the executor
    reaches it does not run. A task cancelled *while* it runs is not interrupted.

    Cancellation is permanent. Kafka only unlinks the entry, so a cancelled task that is
    added again would run. Here the task stays cancelled, so a cancel cannot be undone
    by a racing re-add, and ``cancel`` before ``add`` means the task never runs.
    """

    __slots__ = ("_cancelled", "_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = int(delay_ms)
        self._entry: TimerTaskEntry | None = None
        self._cancelled = False

    @abstractmethod
    def run(self) -> None:
        """The action; the timer calls it on its executor thread."""

    def cancel(self) -> None:
        """Withdraw the task from its bucket; idempotent.

        The flag is set *before* the entry is unlinked: the wheel checks it before linking
        an entry into a bucket and the executor checks it before running one, so a cancel
        that races with the reaper cannot be lost even when ``remove`` finds the entry
        momentarily in no list.
        """
        self._cancelled = True
        entry = self._entry
        self._entry = None
        if entry is not None:
            entry.remove()

    def is_cancelled(self) -> bool:
        return self._cancelled


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTaskEntry:
    """A task's node in a bucket's circular doubly linked list.

    ``list``, ``next`` and ``prev`` are written only under the owning list's lock.
    An entry whose task has since been bound to another entry, or cancelled, is
    *cancelled* and is dropped instead of being re-inserted or run.
    """

    __slots__ = ("expiration_ms", "list", "next", "prev", "timer_task")

    def __init__(self, timer_task: TimerTask | None, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None
        if timer_task is not None:
            # A re-added task drops its previous entry, so it is never in two buckets (and
            # counted twice). Not a TimerTask method: that would be a Python-level lookup
            # on an interpreted subclass.
            old = timer_task._entry
            if old is not None:
                old.remove()
            timer_task._entry = self

    @property
    def cancelled(self) -> bool:
        task = self.timer_task
        return task is None or task._cancelled or task._entry is not self

    def remove(self) -> None:
        """Unlink from whatever list holds the entry now.

        If the reaper relinks the entry between our read of ``list`` and our lock on it,
        ``TimerTaskList.remove`` is a no-op and we retry on the new list.
        """
        current = self.list
        while current is not None:
            current.remove(self)
            current = self.list
