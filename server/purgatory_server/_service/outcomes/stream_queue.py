"""What a server stream sends next: a queue the publisher fills and the stream drains.

Shared by a plain subscriber (:mod:`.subscriptions`) and a worker-group member
(:mod:`.groups.member`): the publisher appends and wakes; the stream takes everything
queued at once, waits while there is nothing (or returns an empty batch after an idle
interval, so the caller can send a heartbeat), and raises the closing error once the
queue is empty and the stream was closed, so what was queued before the close is sent.

Thread safety: loop-confined (both sides run on the event loop thread).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

from purgatory_server._service.model.errors import ServiceError

__all__ = ["StreamQueue"]

T = TypeVar("T")


class StreamQueue(Generic[T]):
    """A loop-confined queue with a wake-up and a closing error."""

    __slots__ = ("_error", "_queue", "_wake")

    def __init__(self) -> None:
        self._queue: deque[T] = deque()
        self._wake = asyncio.Event()
        self._error: ServiceError | None = None

    def _put(self, item: T) -> None:
        self._queue.append(item)
        self._wake.set()

    def close(self, error: ServiceError) -> None:
        """End the stream with ``error`` once what is queued has been sent."""
        if self._error is None:
            self._error = error
        self._wake.set()

    async def _ready(self, idle_s: float | None) -> bool:
        """True once something is queued; False after ``idle_s`` with nothing; raises the
        closing error once closed with nothing left."""
        while not self._queue:
            if self._error is not None:
                raise self._error
            self._wake.clear()
            if idle_s is None:
                await self._wake.wait()
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), idle_s)
            except TimeoutError:
                return False
        return True

    async def _take(self, idle_s: float | None) -> list[T]:
        """Everything queued; [] after ``idle_s`` with nothing; raises once closed."""
        if not await self._ready(idle_s):
            return []
        batch = list(self._queue)
        self._queue.clear()
        return batch
