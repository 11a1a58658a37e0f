"""Statuses of replicated purgatories: "not the owner here", with a route to the owner.

docs/scale-out.md §6: a server that does not own a replicated purgatory (a standby, a
replaced owner, or a server that has never owned it) answers UNAVAILABLE, never
FAILED_PRECONDITION, because the condition is transient and a retry elsewhere succeeds.
Trailing metadata ``purgatory-owner`` names the owner's ``host:port`` when this server
knows it, and ``purgatory-owner-epoch`` its epoch, so a client can prefer the newest
route; a ``RetryInfo`` detail says retry at once (owner known) or after a short wait
(takeover under way).
"""

from __future__ import annotations

from purgatory_server._service.core.errors import Code, ServiceError

__all__ = ["METADATA_OWNER", "METADATA_OWNER_EPOCH", "NotOwner"]

METADATA_OWNER = "purgatory-owner"
METADATA_OWNER_EPOCH = "purgatory-owner-epoch"


class NotOwner(ServiceError):
    """This server does not serve ``purgatory``; ``owner`` (if known) does."""

    code = Code.UNAVAILABLE

    def __init__(self, purgatory: str, owner: str = "", epoch: int = 0) -> None:
        where = f"; its owner is {owner}" if owner else "; a new owner is being chosen"
        super().__init__(f"purgatory {purgatory!r} is not served by this server{where}")
        self.purgatory = purgatory
        self.owner = owner
        self.epoch = epoch
        # RetryInfo (status.py): at once when the owner is known, after a short wait while
        # a takeover is under way.
        self.retry_after_s = 0.0 if owner else 0.2

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        if not self.owner:
            return ()
        return ((METADATA_OWNER, self.owner), (METADATA_OWNER_EPOCH, str(self.epoch)))
