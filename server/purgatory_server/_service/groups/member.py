"""One connected member of a worker group: the Subscribe stream that joined it.

The group pushes deliveries into the member's queue and the stream sends them. The queue
never holds more than ``prefetch`` deliveries, because the group leases to a member only
while it holds fewer than ``prefetch`` leases (sent or not): a member that stops reading
simply stops receiving, and its leases run out and go to the others.

Thread safety: loop-confined (the group pushes on the loop thread; the stream awaits on it).
"""

from __future__ import annotations

from typing import NamedTuple

from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.stream_queue import StreamQueue

__all__ = ["Delivery", "GroupMember"]


class Delivery(NamedTuple):
    """An outcome leased to a member: its attempt number and the lease's wall deadline
    (and, from a group with a selection, the outcome's priority and ordering key)."""

    outcome: Outcome
    group: str
    attempt: int
    lease_deadline_ms: int
    priority: int = 0
    ordering_key: str = ""


class GroupMember(StreamQueue[Delivery]):
    """A member's buffer of deliveries to send and the sequences it holds leases on."""

    __slots__ = ("leases", "prefetch")

    def __init__(self, prefetch: int) -> None:
        self.prefetch = prefetch
        self.leases: set[int] = set()
        super().__init__()

    @property
    def room(self) -> int:
        return 0 if self._error is not None else self.prefetch - len(self.leases)

    def push(self, delivery: Delivery) -> None:
        self.leases.add(delivery.outcome.sequence)
        self._put(delivery)

    async def next_batch(self, idle_s: float | None = None) -> list[Delivery]:
        """The deliveries to send next; [] after ``idle_s`` idle; raises once closed."""
        return await self._take(idle_s)
