"""Which live member should own a replicated purgatory: rendezvous hashing.

The rule is highest-random-weight (rendezvous) hashing: purgatory ``p`` belongs to the
live member ``m`` that can serve it with the highest :func:`score` ``(p, m)``; ties go to
the greater server id, so every server that sees the same member set computes the same
owner without talking to the others. A join takes exactly the purgatories whose top score
becomes the newcomer's; a leave moves exactly the leaver's, each to its second choice.

The hash must be stable across processes and machines: blake2b, never Python's salted
``hash``. A score mixes two 64-bit hashes (SplitMix64's finaliser over their xor) rather
than hashing the pair, so one hash per name can be precomputed.

The decisions :class:`Placement` makes (when a standby may acquire an absent lease, when
an owner hands a purgatory over) are pure functions of a member view and the caller's
clock readings, so they are tested without NATS. Thread-safety: no shared state.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Member", "MemberView", "Placement", "h64", "mix", "ranked", "score"]

MASK64 = (1 << 64) - 1


def h64(text: str) -> int:
    """A stable 64-bit hash of a name (blake2b; Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def mix(a: int, b: int) -> int:
    """SplitMix64's finaliser over ``a ^ b``: the score of two precomputed :func:`h64`."""
    z = (a ^ b) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def score(purgatory: str, server_id: str) -> int:
    """The rendezvous score of ``server_id`` for ``purgatory``: highest wins."""
    return mix(h64(purgatory), h64(server_id))


def ranked(purgatory: str, server_ids: Iterable[str]) -> list[str]:
    """``server_ids`` best first for ``purgatory`` (owner, then standbys)."""
    ph = h64(purgatory)
    return sorted(server_ids, key=lambda m: (mix(ph, h64(m)), m), reverse=True)


@dataclass(frozen=True, slots=True)
class Member:
    """A live server as the membership bucket shows it."""

    server_id: str
    address: str
    purgatories: frozenset[str]
    since: float  # when this server first saw it live (its own monotonic clock)


class MemberView(Protocol):
    """What placement reads: the members live now (this server included)."""

    def live(self) -> list[Member]: ...


class Placement:
    """This server's placement decisions over a member view (see module docstring).

    ``grace_s``: how long a lease key must stay absent before a member that is not the
    preferred one acquires it (so a purgatory is never left unowned when its preferred
    member is absent or broken); ``hold_s``: how long an owner keeps a purgatory after its
    takeover whatever the members do; ``settle_s``: how long the preferred member must have
    been live before it is handed a purgatory. The last two keep membership noise from
    making a purgatory flap.
    """

    def __init__(
        self,
        members: MemberView,
        server_id: str,
        *,
        grace_s: float,
        hold_s: float,
        settle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._members = members
        self.server_id = server_id
        self.grace_s = grace_s
        self.hold_s = hold_s
        self.settle_s = settle_s
        self.clock = clock  # the clock of Member.since and of the callers' readings

    def preferred(self, purgatory: str, lost: str = "") -> Member | None:
        """The live member that should own ``purgatory`` (None: no live member serves it),
        leaving out ``lost``, the server id whose lease just ended."""
        best: tuple[int, str] | None = None
        chosen: Member | None = None
        ph = h64(purgatory)
        for member in self._members.live():
            if purgatory not in member.purgatories or member.server_id == lost:
                continue
            key = (mix(ph, h64(member.server_id)), member.server_id)
            if best is None or key > best:
                best, chosen = key, member
        return chosen

    def may_acquire(self, purgatory: str, absent_since: float, lost: str = "") -> bool:
        """May this standby create the absent lease key now?

        At once if it is the preferred member (or nobody live is: its own key may not be
        visible yet); otherwise once the key has been absent since ``absent_since`` for
        ``grace_s``, the preferred member's chance to notice and acquire first. ``lost``
        is the server whose lease expired: usually the preferred member itself, dead or
        cut off while its member key has not lapsed yet, so it is not waited for.
        """
        best = self.preferred(purgatory, "" if lost == self.server_id else lost)
        if best is None or best.server_id == self.server_id:
            return True
        return self.clock() - absent_since >= self.grace_s

    def hand_over_to(self, purgatory: str, owned_since: float) -> Member | None:
        """The member this owner should hand ``purgatory`` to now, or None to keep it."""
        now = self.clock()
        if now - owned_since < self.hold_s:
            return None
        best = self.preferred(purgatory)
        if best is None or best.server_id == self.server_id:
            return None
        if now - best.since < self.settle_s:
            return None
        return best
