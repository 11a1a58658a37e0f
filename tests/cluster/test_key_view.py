"""What a standby makes of the lease key it polls (key_view.py), on an explicit clock.

- a key that expires normally: placement decides (the dead owner's successor at once);
- a key that stayed at one revision past its TTL (the bucket had no leader) or a failed
  read: for OUTAGE_S a key that disappears is left to its last holder;
- the server whose lease lapsed with the bucket out of reach takes it back at once.
"""

from __future__ import annotations

from purgatory_server._cluster.key_view import OUTAGE_S, STALE_LEASES, KeyView
from purgatory_server._cluster.placement import Member, Placement, ranked

LEASE_S = 1.5


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _View:
    def __init__(self, *ids: str) -> None:
        self.members = [Member(i, f"{i}:1", frozenset({"p"}), 0.0) for i in ids]

    def live(self) -> list[Member]:
        return list(self.members)


def _standby(clock: _Clock, me: str, *ids: str) -> Placement:
    return Placement(_View(*ids), me, grace_s=LEASE_S / 2, hold_s=LEASE_S, settle_s=3, clock=clock)


def test_a_dead_owners_key_goes_to_the_next_member_at_once() -> None:
    clock = _Clock()
    owner, standby = ranked("p", ["x", "y"])
    view = KeyView(_standby(clock, standby, owner, standby), LEASE_S, standby)
    for revision in range(1, 4):  # renewed every lease / 3
        view.held(owner, revision)
        clock.now += LEASE_S / 3
    assert view.absent("p")  # its owner is gone: no wait


def test_after_an_outage_the_key_is_left_to_its_last_holder() -> None:
    clock = _Clock()
    owner, standby = ranked("p", ["x", "y"])
    view = KeyView(_standby(clock, standby, owner, standby), LEASE_S, standby)
    view.held(owner, 7)
    clock.now += STALE_LEASES * LEASE_S + 0.1
    view.held(owner, 7)  # not renewed, not expired: no leader
    clock.now += 5.0
    assert not view.absent("p")
    clock.now += OUTAGE_S - 5.0  # the old owner did not come back for it
    assert view.absent("p")
    # A read that failed counts the same.
    other = KeyView(_standby(clock, standby, owner, standby), LEASE_S, standby)
    other.held(owner, 8)
    other.unreachable()
    assert not other.absent("p")


def test_the_server_whose_lease_lapsed_takes_it_back_at_once() -> None:
    clock = _Clock()
    owner, standby = ranked("p", ["x", "y"])
    view = KeyView(_standby(clock, owner, owner, standby), LEASE_S, owner)
    view.lapsed(True)
    view.unreachable()
    view.held(owner, 7)  # its own stale key
    assert view.absent("p")
    view.held(standby, 9)  # someone else got it after all: back to placement's rules
    assert view.last == standby
    # Its next cycle after a hand-over (not lapsed): its own past ownership is no claim.
    view.held(owner, 10)
    view.lapsed(False)
    assert view.last == ""
