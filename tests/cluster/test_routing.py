"""Routing: both Python clients pointed at a standby reach the owner and cache the route.

Servers A (owner of ``routed``: placement ranks it first) and B (standby). Clients are
given B's address only:

- the sync and the async client register, signal and read operations through B; each
  call is answered by A (B answers UNAVAILABLE + ``purgatory-owner``, the client re-sends
  there) and the route is cached, so later calls go to A directly;
- A hands the purgatory over (SIGTERM: it releases its lease after its last append) while
  a long-poll waits on it; the long-poll ends UNAVAILABLE at A, the client drops the route
  and re-sends the same operation id to its own target B (by itself if B serves by then,
  else the test re-sends), and it gets the outcome the signal gives the registration
  made at A: nothing acknowledged is lost by the move.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from purgatory_client import AsyncPurgatoryClient, PurgatoryClient
from purgatory_client._models import OperationState
from purgatory_client.errors import AlreadyExistsError, UnavailableError
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import ReplicatedServer, by_rank, wait_owner

NAME = "routed"


async def test_clients_follow_the_owner_and_survive_a_hand_over(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    first, second = by_rank(NAME, 2)  # so B never takes the purgatory from A by placement
    a = ReplicatedServer(tmp_path, "a", nats_cluster.urls, NAME, first)
    a.wait_port()
    assert await wait_owner([a], NAME, 30) == 0
    b = ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, second)
    b.wait_port()
    sync = PurgatoryClient(b.address, purgatory=NAME, timeout=10)
    client = AsyncPurgatoryClient(b.address, purgatory=NAME, timeout=10)
    try:
        # B does not own it: calls are re-sent to A, and the route is remembered.
        status = await asyncio.to_thread(sync.try_complete_else_watch, ["k"], 60_000)
        assert status.state is OperationState.WATCHING
        assert sync._router.routes == {NAME: a.address}
        created = await client.try_complete_else_watch(["k"], 60_000, operation_id="async-1")
        assert created.created and client._router.routes == {NAME: a.address}
        assert await client.check_and_complete("k") == 2
        assert (await client.get_operation("async-1")).state is OperationState.COMPLETED
        info = await asyncio.to_thread(sync.get_purgatory)
        assert info.pending == 0 and info.last_sequence == 2
        # A standby never creates a replicated name itself: the call reaches the owner.
        try:
            await client.create_purgatory(NAME)
            raise AssertionError("a replicated purgatory was created a second time")
        except AlreadyExistsError:
            pass

        # A long-poll waits at A while A hands the purgatory over to B.
        poll = asyncio.ensure_future(
            client.try_complete_else_watch(["moved"], 60_000, operation_id="lp", wait=True)
        )
        deadline = time.monotonic() + 10
        while (await client.get_purgatory()).pending == 0:  # registered at A
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        a.stop()
        await wait_owner([b], NAME, 30)
        # The registration made at A is pending at B; the sync client's route to A fails
        # (A is gone), is dropped, and the signal goes to B.
        assert await asyncio.to_thread(sync.check_and_complete, "moved") == 1
        try:
            done = await asyncio.wait_for(poll, 20)  # re-sent to B by the client itself
        except UnavailableError:
            # A ended it while B was not serving yet: re-send the same id by hand.
            done = await client.try_complete_else_watch(
                ["moved"], 60_000, operation_id="lp", wait=True
            )
        assert done.operation_id == "lp" and done.state is OperationState.COMPLETED
        assert not done.created  # the registration made at A, found again at B
        assert client._router.routes.get(NAME) in (None, b.address)
    finally:
        await client.close()
        sync.close()
        a.stop()
        b.stop()
