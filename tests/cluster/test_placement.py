"""Rendezvous placement over live members, and rebalancing when a server joins or leaves.

The rule and the decisions are pure (a member view and a clock), tested first without
NATS. Then, against the session's NATS cluster, three servers whose ids placement ranks
C > A > B for purgatory ``rebalanced``:

(a) B starts alone and owns it; A, ranked above B, joins: B hands it over to A, so the
    top-ranked live member owns it whichever started first (test_routing covers A first);
(b) C, ranked first, joins while a long-poll waits at A: A hands over to C, the long-poll
    ends UNAVAILABLE naming C, the client re-sends the same operation id there and gets
    the outcome of a signal sent after the move;
(c) C stops (SIGTERM): it leaves the members bucket and releases its lease, and A, now
    ranked first again, takes the purgatory back without waiting for a TTL.

A watch registered at B before any move is pending at every later owner.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from purgatory_client import AsyncPurgatoryClient
from purgatory_client._models import OperationState
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.membership import Membership, member_key
from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.placement import Member, Placement, h64, mix, ranked, score

from tests.cluster.servers import ReplicatedServer, by_rank, stub, wait_owner

NAME = "rebalanced"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _View:
    def __init__(self, *members: Member) -> None:
        self.members = list(members)

    def live(self) -> list[Member]:
        return list(self.members)


def _member(server_id: str, since: float = 0.0, names: tuple[str, ...] = ("p",)) -> Member:
    return Member(server_id, f"{server_id}:1", frozenset(names), since)


def test_score_is_stable_and_ranks_highest_first() -> None:
    # A changed hash would move purgatories on upgrade: the value is pinned.
    assert score("orders", "server1") == 0x8A2AA5A509E2D58B
    assert score("orders", "server1") == mix(h64("orders"), h64("server1"))
    ids = [f"s{i}" for i in range(20)]
    order = ranked("p", ids)
    assert sorted(order) == sorted(ids)
    assert [score("p", m) for m in order] == sorted((score("p", m) for m in ids), reverse=True)
    assert ranked("p", reversed(ids)) == order  # independent of the input order


def test_standby_acquires_at_once_only_when_preferred() -> None:
    clock = _Clock()
    top, low = ranked("p", ["x", "y"])
    view = _View(_member(top), _member(low))
    at_top = Placement(view, top, grace_s=1.0, hold_s=2.0, settle_s=3.0, clock=clock)
    at_low = Placement(view, low, grace_s=1.0, hold_s=2.0, settle_s=3.0, clock=clock)
    assert at_top.preferred("p") == view.members[0]
    assert at_top.may_acquire("p", absent_since=clock.now)
    assert not at_low.may_acquire("p", absent_since=clock.now)
    clock.now += 0.99
    assert not at_low.may_acquire("p", absent_since=100.0)
    clock.now += 0.01  # the preferred member had its grace: never left unowned
    assert at_low.may_acquire("p", absent_since=100.0)
    # The preferred member's own lease expired (killed): the next one does not wait.
    assert at_low.may_acquire("p", absent_since=clock.now, lost=top)
    assert at_top.may_acquire("p", absent_since=clock.now, lost=top)
    # A member that does not name the purgatory is never preferred for it.
    view.members[0] = _member(top, names=("other",))
    assert at_low.may_acquire("p", absent_since=clock.now)


def test_owner_hands_over_to_a_settled_preferred_member_only() -> None:
    clock = _Clock()
    top, low = ranked("p", ["x", "y"])
    view = _View(_member(low))
    owner = Placement(view, low, grace_s=1.0, hold_s=2.0, settle_s=3.0, clock=clock)
    assert owner.hand_over_to("p", owned_since=0.0) is None  # alone: keeps it
    joined = _member(top, since=clock.now)
    view.members.append(joined)
    assert owner.hand_over_to("p", owned_since=0.0) is None  # the newcomer is not settled
    clock.now += 3.0
    assert owner.hand_over_to("p", owned_since=clock.now - 1.0) is None  # just took over
    assert owner.hand_over_to("p", owned_since=0.0) == joined
    assert (
        Placement(view, top, grace_s=1, hold_s=2, settle_s=3, clock=clock).hand_over_to(
            "p", owned_since=0.0
        )
        is None
    )  # the preferred owner keeps it


def test_membership_view_lapses_and_rejoins() -> None:
    clock = _Clock()
    view = Membership(None, "me", "me:1", ["p"], lease_s=1.0, clock=clock)
    assert [m.server_id for m in view.live()] == ["me"]
    raw = b'{"server_id": "other", "address": "o:1", "purgatories": ["p"]}'
    view.observe(raw, deleted=False)
    (other,) = [m for m in view.live() if m.server_id == "other"]
    assert other.address == "o:1" and other.purgatories == {"p"} and other.since == 100.0
    clock.now += 0.9
    view.observe(raw, deleted=False)  # a renewal keeps its since
    assert [m.since for m in view.live() if m.server_id == "other"] == [100.0]
    clock.now += 1.1  # no renewal for more than a lease: not live
    assert [m.server_id for m in view.live()] == ["me"]
    view.observe(raw, deleted=False)  # back: live again, since starts over
    assert [m.since for m in view.live() if m.server_id == "other"] == [clock.now]
    view.observe(None, deleted=True, key=member_key("other"))  # a graceful leave
    assert [m.server_id for m in view.live()] == ["me"]
    view.observe(b"not json", deleted=False)
    assert len(view.live()) == 1


async def _owner_hint(server: ReplicatedServer) -> str:
    """What ``server`` says about the purgatory: "self" if it serves it, else its hint."""
    channel, client = stub(server.address)
    try:
        await client.GetPurgatory(pb.GetPurgatoryRequest(name=NAME), timeout=5)
        return "self"
    except grpc.aio.AioRpcError as exc:
        assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
        return str(dict(exc.trailing_metadata() or ()).get("purgatory-owner", ""))
    finally:
        await channel.close()


async def _eventually_named(server: ReplicatedServer, owner: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (hint := await _owner_hint(server)) != owner:
        assert time.monotonic() < deadline, (server.label, hint, owner)
        await asyncio.sleep(0.05)


async def test_purgatory_follows_the_top_ranked_member_on_join_and_leave(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    c_id, a_id, b_id = by_rank(NAME, 3)
    servers: list[ReplicatedServer] = []

    def start(label: str, server_id: str) -> ReplicatedServer:
        server = ReplicatedServer(tmp_path, label, nats_cluster.urls, NAME, server_id)
        servers.append(server)
        server.wait_port()
        return server

    client: AsyncPurgatoryClient | None = None
    try:
        # (a) B alone owns it; A, ranked above B, joins and gets it.
        b = start("b", b_id)
        assert await wait_owner([b], NAME, 30) == 0
        client = AsyncPurgatoryClient(b.address, purgatory=NAME, timeout=20)
        kept = await client.try_complete_else_watch(["kept"], 600_000, operation_id="kept")
        assert kept.created
        a = start("a", a_id)
        assert await wait_owner([a], NAME, 20) == 0
        await _eventually_named(b, a.address, 10)
        assert "handing over to" in b.log_text()  # a hand-over, not a lease that expired

        # (b) C, ranked first, joins while a long-poll waits at A.
        poll = asyncio.ensure_future(
            client.try_complete_else_watch(["moved"], 600_000, operation_id="lp", wait=True)
        )
        deadline = time.monotonic() + 10
        while (await client.get_purgatory()).pending < 2:  # "lp" registered at A
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert client._router.routes == {NAME: a.address}
        c = start("c", c_id)
        assert await wait_owner([c], NAME, 20) == 0
        assert not poll.done()  # still waiting: at A until the move, then at C
        await _eventually_named(a, c.address, 10)  # A names C from its eviction on
        assert await client.check_and_complete("moved") == 1  # at C (routed there)
        done = await asyncio.wait_for(poll, 20)
        assert done.operation_id == "lp" and done.state is OperationState.COMPLETED
        assert not done.created  # the registration made at A, found again at C
        assert client._router.routes == {NAME: c.address}
        assert "handing over to" in a.log_text()

        # (c) C leaves gracefully: A, first again, takes it back at once.
        c.stop()
        assert await wait_owner([a], NAME, 20) == 0
        await _eventually_named(b, a.address, 10)
        status = await client.get_operation("kept")
        assert status.state is OperationState.WATCHING  # registered at B, two moves ago
    finally:
        if client is not None:
            await client.close()
        for server in servers:
            server.stop()
