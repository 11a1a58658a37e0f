"""One outcome held by a worker group, and where it stands: ready, leased, waiting or dead.

An entry exists from the moment its group takes the outcome in until a member acks it
(or the group is deleted). Its ``attempts`` counts deliveries over the entry's whole life
and only ever grows, redrives included: it is the fencing token a member's ack or
extension must show, so a number once handed out is never handed out again (a consumer
whose lease lapsed can never ack the delivery another member now holds). A redrive gives
a fresh *budget* instead: ``redriven_at`` records ``attempts`` at the last redrive, and
``max_attempts`` counts the deliveries after it. ``lease`` is the timer task of the current lease
(LEASED) or of the wait before the next offer (WAITING, ``retry_at_ms``: a nack's delay or
the group's backoff): a task is current only while ``entry.lease is task``, which is how an
expiry that raced with an ack, an extension, a nack or a redelivery is recognised as stale
and ignored.

Thread safety: loop-confined, like the group that owns it.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from purgatory_server._service.model.outcome import Outcome

if TYPE_CHECKING:
    from purgatory_server._service.groups.lease import LeaseTask
    from purgatory_server._service.groups.member import GroupMember

__all__ = ["EntryState", "GroupEntry"]


class EntryState(enum.Enum):
    READY = "ready"  # waiting for a member with room
    LEASED = "leased"  # delivered; acked, extended, nacked or expired next
    WAITING = "waiting"  # a delivery ended unacked: offered again at retry_at_ms
    DEAD = "dead"  # out of attempts; listed and redriven by hand


class GroupEntry:
    """An outcome in a group (loop-confined)."""

    __slots__ = (
        "attempts",
        "holder",
        "lease",
        "lease_deadline_ms",
        "outcome",
        "redriven_at",
        "retry_at_ms",
        "state",
    )

    def __init__(
        self, outcome: Outcome, attempts: int = 0, dead: bool = False, redriven_at: int = 0
    ) -> None:
        self.outcome = outcome
        self.attempts = attempts
        self.redriven_at = redriven_at
        self.state = EntryState.DEAD if dead else EntryState.READY
        self.lease: LeaseTask | None = None
        self.holder: GroupMember | None = None
        self.lease_deadline_ms = 0
        self.retry_at_ms = 0

    @property
    def sequence(self) -> int:
        return self.outcome.sequence

    def budget_spent(self, max_attempts: int) -> bool:
        """Whether the deliveries since the last redrive (or intake) reach the limit."""
        return self.attempts - self.redriven_at >= max_attempts

    def failures(self) -> int:
        """Deliveries since the last redrive (or intake): each one that ended unacked."""
        return self.attempts - self.redriven_at

    def drop_lease(self) -> None:
        """Forget the current lease (or wait): cancel its timer, free its holder's slot."""
        lease = self.lease
        if lease is not None:
            self.lease = None
            lease.cancel()
        holder = self.holder
        if holder is not None:
            self.holder = None
            holder.leases.discard(self.outcome.sequence)
