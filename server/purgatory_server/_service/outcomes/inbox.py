"""Hand-off of completed operations from engine threads to the event loop, in batches.

Operations end on whichever thread completed them: the loop thread (a signal, a
ForceComplete) or the timer's reaper thread (expiry). Waiters, subscribers and sequence
numbers live on the loop, so every completion is put in this inbox. Only the put that
finds the inbox idle schedules a drain, so one wake-up carries a whole batch. Puts from
the loop thread itself use ``call_soon``; loop-side callers may also :meth:`drain` (or
:meth:`take`) synchronously to publish at once.

Thread safety: :meth:`put` from any thread; :meth:`drain` and :meth:`take` only on the loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Inbox"]

logger = logging.getLogger("purgatory_server.service")

T = TypeVar("T")


class Inbox(Generic[T]):
    """A thread-safe list drained on one event loop by ``handler(batch)``."""

    __slots__ = ("_handler", "_items", "_lock", "_loop", "_loop_thread", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop, handler: Callable[[list[T]], object]):
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._handler = handler
        self._lock = threading.Lock()
        self._items: list[T] = []
        self._scheduled = False

    def put(self, item: T) -> None:
        with self._lock:
            self._items.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self.drain)
            return
        try:
            self._loop.call_soon_threadsafe(self.drain)
        except RuntimeError:
            # The loop is closed: the server is gone and nobody can observe the outcome.
            logger.warning("outcome dropped: event loop closed")

    def take(self) -> list[T]:
        """Everything put so far, for the caller to handle (loop thread)."""
        if not self._items:
            # Nothing to take (read without the lock: one GIL-atomic ``len``). A put racing
            # this read schedules its own drain, or finds one scheduled: nothing is missed.
            return []
        with self._lock:
            items = self._items
            self._scheduled = False
            if not items:
                return items
            self._items = []
        return items

    def drain(self) -> int:
        """Hand everything put so far to the handler; returns how many items there were."""
        items = self.take()
        if items:
            self._handler(items)
        return len(items)
