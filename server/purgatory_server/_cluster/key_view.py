"""What a standby saw of a purgatory's lease key, and whether it may create it now.

docs/scale-out.md, "Ownership, epochs and fencing" and "Failure cases". A standby polls
the key every ``lease / 10``. A key that disappears normally means its owner stopped
renewing and the TTL removed it; placement then says who acquires first
(:meth:`~.placement.Placement.may_acquire`). But while the bucket's JetStream leader is
being elected again, *nobody* can renew: the owner's lease lapses too, and its key
disappears only once a leader is back. Moving the purgatory then would move every
purgatory of the cluster at once, so for
:data:`OUTAGE_S` after a standby saw such an **outage** (a read failing, or the same
revision present for longer than :data:`STALE_LEASES` leases: a TTL that did not run) it
leaves a key that disappears to its last holder, and the server whose lease lapsed that
way (``last`` is itself: :mod:`.holder`) creates it at once: it gets its purgatory back.
The price: an owner that dies *during* such an outage is replaced up to :data:`OUTAGE_S`
later.

Pure state and clock readings (tested without NATS). Thread-safety: loop-confined.
"""

from __future__ import annotations

from purgatory_server._cluster.placement import Placement

__all__ = ["OUTAGE_S", "STALE_LEASES", "KeyView"]

# A key seen with the same revision for this many leases was not removed by its TTL:
# the bucket had no leader meanwhile (an owner renews every lease / 3).
STALE_LEASES = 1.5
# After an outage, how long a key that disappears is left to its old owner: that owner may
# need its journal stream's leader elected again too before its takeover can fence, and
# a NATS election takes seconds.
OUTAGE_S = 10.0


class KeyView:
    """One standby's observations of one lease key (see module docstring)."""

    def __init__(self, placement: Placement, lease_s: float, server_id: str) -> None:
        self._placement = placement
        self._lease_s = lease_s
        self._me = server_id
        # The server id that held the key when last seen ("" unknown).
        self.last = ""
        self.absent_since: float | None = None
        self.outage_at: float | None = None  # when the bucket last looked unhealthy
        self._revision = -1
        self._revision_since = 0.0

    def lapsed(self, lapsed: bool) -> None:
        """A standby cycle starts: ``lapsed`` if this server's own lease just lapsed with
        the bucket out of reach (it then counts as the key's last holder). Otherwise its
        own past ownership counts for nothing: after a hand-over or a fence the key is
        the others', and placement decides (the outage seen, if any, is remembered)."""
        self.last = self._me if lapsed else ""
        self.absent_since = None

    def unreachable(self) -> None:
        """A read of the key failed."""
        self.absent_since, self.outage_at = None, self._placement.clock()

    def held(self, server_id: str, revision: int) -> None:
        """The key is held by ``server_id`` at ``revision``."""
        now = self._placement.clock()
        self.absent_since, self.last = None, server_id
        if revision != self._revision:  # renewed (or acquired again)
            self._revision, self._revision_since = revision, now
        elif now - self._revision_since > STALE_LEASES * self._lease_s:
            self.outage_at = now  # not renewed, yet not removed by its TTL

    def absent(self, purgatory: str) -> bool:
        """The key is absent: True if this server may create it now."""
        now = self._placement.clock()
        if self.absent_since is None:
            self.absent_since = now
        if self.last == self._me:
            return True  # its lease lapsed here with the bucket: it gets it back first
        if self.outage_at is not None and now - self.outage_at < OUTAGE_S:
            return False  # left to its last holder, whose lease may have lapsed that way
        return self._placement.may_acquire(purgatory, self.absent_since, self.last)
