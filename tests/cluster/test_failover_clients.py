"""What clients live through when an owner dies or pauses (docs/scale-out.md §9).

Servers A (owner: placement ranks it first) and B (standby), on a 1.5 s lease. Clients
dial ``ipv4:A,B`` (gRPC tries A first, then B) or B alone (routed to A):

- **SIGKILL of A** with subscribers streaming from A, one directly and one routed
  through B: both resume at B from their sequence, with no gap and no repeat, within a
  bound (the old client parked its stream on the dead owner for good);
- **SIGSTOP of A past its lease**: writers through either target are served by B within
  lease + :data:`BOUND_S`, and no call takes longer than :data:`BOUND_S` (keepalive pings
  close the paused connection; the old clients waited for their deadline, 0 writes
  acknowledged during the pause).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from pathlib import Path

from purgatory_client import AsyncPurgatoryClient, Event, PurgatoryClient
from purgatory_client.errors import PurgatoryError
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import LEASE_MS, ReplicatedServer, by_rank, wait_owner

# A call to a paused server ends within the client's keepalive (2 s ping + 2 s timeout),
# plus a reconnect's handshake bound (2 s) for a call that started just after it.
BOUND_S = 6.5


async def _pair(tmp_path: Path, urls: list[str], name: str) -> tuple[ReplicatedServer, ...]:
    first, second = by_rank(name, 2)
    a = ReplicatedServer(tmp_path, "a", urls, name, first)
    a.wait_port()
    assert await wait_owner([a], name, 30) == 0
    b = ReplicatedServer(tmp_path, "b", urls, name, second)
    b.wait_port()
    return a, b


async def _complete(client: AsyncPurgatoryClient, first: int, count: int) -> None:
    for i in range(first, first + count):
        deadline = time.monotonic() + 15
        while True:
            try:
                await client.try_complete_else_watch([f"k{i}"], 60_000, operation_id=f"op{i}")
                assert await client.check_and_complete(f"k{i}") == 1
                break
            except PurgatoryError:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)


async def _until(events: list[Event], count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(events) < count:
        assert time.monotonic() < deadline, f"{len(events)} of {count} events: stalled"
        await asyncio.sleep(0.02)


async def test_subscribers_resume_at_the_new_owner_after_kill(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    name = "killed"
    a, b = await _pair(tmp_path, nats_cluster.urls, name)
    both = f"ipv4:{a.address},{b.address}"
    writer = AsyncPurgatoryClient(both, purgatory=name, timeout=5)
    direct = AsyncPurgatoryClient(both, purgatory=name, timeout=5)
    routed = PurgatoryClient(b.address, purgatory=name, timeout=5)
    direct_events: list[Event] = []
    routed_events: list[Event] = []

    async def subscribe() -> None:
        async for event in direct.subscribe(after_sequence=0):
            direct_events.append(event)

    def subscribe_sync() -> None:
        try:
            for event in routed.subscribe(after_sequence=0):
                routed_events.append(event)
        except (PurgatoryError, ValueError):
            pass  # closed at the end of the test (or gave up: the count says so)

    tasks = [
        asyncio.ensure_future(subscribe()),
        asyncio.ensure_future(asyncio.to_thread(subscribe_sync)),
    ]
    try:
        await _complete(writer, 1, 3)
        await _until(direct_events, 3, 10)
        await _until(routed_events, 3, 10)
        assert routed._router.routes == {name: a.address}
        a.kill()
        killed = time.monotonic()
        await _complete(writer, 4, 3)
        # Resumed at B: within the lease, the takeover and a few backoffs of the client.
        await _until(direct_events, 6, 12)
        await _until(routed_events, 6, 12)
        resumed = time.monotonic() - killed
        for events in (direct_events, routed_events):
            assert [e.sequence for e in events] == list(range(1, 7))
            assert [e.operation_id for e in events] == [f"op{i}" for i in range(1, 7)]
        assert routed._router.routes.get(name) in (None, b.address)
        logging.getLogger(__name__).info("subscribers resumed %.2fs after SIGKILL", resumed)
    finally:
        routed.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await writer.close()
        await direct.close()
        a.stop()
        b.stop()


async def test_writers_move_to_the_standby_when_the_owner_pauses(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    name = "paused"
    a, b = await _pair(tmp_path, nats_cluster.urls, name)
    clients = [
        AsyncPurgatoryClient(f"ipv4:{a.address},{b.address}", purgatory=name, timeout=30),
        AsyncPurgatoryClient(b.address, purgatory=name, timeout=30),
    ]
    ids = itertools.count()
    # (client, started, ended, acknowledged) of every call
    calls: list[tuple[int, float, float, bool]] = []
    stop = asyncio.Event()

    async def write(index: int) -> None:
        client = clients[index]
        while not stop.is_set():
            started = time.monotonic()
            try:
                await client.try_complete_else_watch(["k"], 60_000, operation_id=f"w{next(ids)}")
                ok = True
            except PurgatoryError:
                ok = False
            calls.append((index, started, time.monotonic(), ok))
            await asyncio.sleep(0.05)

    tasks = [asyncio.ensure_future(write(i)) for i in range(len(clients))]
    try:
        await asyncio.sleep(1.0)
        assert all(any(c[0] == i and c[3] for c in calls) for i in range(len(clients)))
        a.pause()
        paused = time.monotonic()
        await wait_owner([b], name, 30)
        await asyncio.sleep(LEASE_MS / 1000 + BOUND_S + 1.0 - (time.monotonic() - paused))
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 35)
    finally:
        stop.set()
        a.resume()
        for client in clients:
            await client.close()
        a.stop()
        b.stop()
    for index in range(len(clients)):
        mine = [c for c in calls if c[0] == index]
        acknowledged = [c[2] - paused for c in mine if c[3] and c[1] > paused]
        assert acknowledged, f"client {index}: no write acknowledged after the pause"
        first_ok = min(acknowledged)
        longest = max(c[2] - c[1] for c in mine if c[2] > paused)
        logging.getLogger(__name__).info(
            "client %d: first write %.2fs after SIGSTOP, longest call %.2fs",
            index,
            first_ok,
            longest,
        )
        assert first_ok <= LEASE_MS / 1000 + BOUND_S, (index, first_ok)
        assert longest <= BOUND_S, (index, longest)
