"""One connected member of a worker group: the Subscribe stream that joined it.

The group pushes deliveries into the member's queue and the stream sends them. The queue
never holds more than ``prefetch`` deliveries, because the group leases to a member only
while it holds fewer than ``prefetch`` leases (sent or not): a member that stops reading
simply stops receiving, and its leases run out and go to the others.

Thread safety: loop-confined (the group pushes on the loop thread; the stream awaits on it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import NamedTuple

from purgatory_server._service.errors import ServiceError
from purgatory_server._service.events import Outcome

__all__ = ["Delivery", "GroupMember"]


class Delivery(NamedTuple):
    """An outcome leased to a member: its attempt number and the lease's wall deadline."""

    outcome: Outcome
    group: str
    attempt: int
    lease_deadline_ms: int


class GroupMember:
    """A member's buffer of deliveries to send and the sequences it holds leases on."""

    __slots__ = ("_error", "_queue", "_wake", "leases", "prefetch")

    def __init__(self, prefetch: int) -> None:
        self.prefetch = prefetch
        self.leases: set[int] = set()
        self._queue: deque[Delivery] = deque()
        self._wake = asyncio.Event()
        self._error: ServiceError | None = None

    @property
    def room(self) -> int:
        return 0 if self._error is not None else self.prefetch - len(self.leases)

    def push(self, delivery: Delivery) -> None:
        self.leases.add(delivery.outcome.sequence)
        self._queue.append(delivery)
        self._wake.set()

    def close(self, error: ServiceError) -> None:
        """End the stream with ``error`` once the queued deliveries are sent."""
        if self._error is None:
            self._error = error
        self._wake.set()

    async def next_batch(self, idle_s: float | None = None) -> list[Delivery]:
        """The deliveries to send next; [] after ``idle_s`` idle; raises once closed."""
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
                return []
        batch = list(self._queue)
        self._queue.clear()
        return batch
