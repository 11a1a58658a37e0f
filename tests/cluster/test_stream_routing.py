"""Streams routed to the owner: subscriptions and sessions opened at a standby.

Servers A (owner of ``streamed``) and B (standby); the streaming clients know only B:

- an async subscriber at B (from sequence 0) gets the owner's events: B refuses the
  stream with UNAVAILABLE + ``purgatory-owner``, the client re-opens it at A;
- a sync and an async Session opened at B register, signal and get outcomes, and so does
  ``watch_many`` of a fresh client (the client finds the owner before opening the stream),
  and of a client that skips that probe (B's refusal of the session names the owner);
  a worker-group member joining at B joins at A;
- A is killed (-9): the subscriber's stream breaks, it resumes at B once B has taken
  over, from its last sequence: the events it sees are 1..N with no gap and no repeat;
- A comes back as A2 (standby); a sync subscriber at A2 (routed to B) rides B's graceful
  hand-over (SIGTERM) to A2 the same way.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from pathlib import Path

from purgatory_client import AsyncPurgatoryClient, Event, OperationSpec, PurgatoryClient
from purgatory_client.errors import PurgatoryError
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import ReplicatedServer, by_rank, wait_owner

NAME = "streamed"


async def _complete(client: AsyncPurgatoryClient, first: int, count: int) -> None:
    """``count`` operations registered and completed by a signal: one event each."""
    for i in range(first, first + count):
        deadline = time.monotonic() + 15
        while True:
            try:
                await client.try_complete_else_watch([f"k{i}"], 60_000, operation_id=f"op{i}")
                assert await client.check_and_complete(f"k{i}") == 1
                break
            except PurgatoryError:
                # A takeover is under way (or the owner just moved): retry the same id.
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)


async def _until(events: list[Event], count: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(events) < count:
        assert time.monotonic() < deadline, f"{len(events)} of {count} events"
        await asyncio.sleep(0.02)


def _gap_free(events: list[Event], count: int) -> None:
    assert [e.sequence for e in events] == list(range(1, count + 1))
    assert len({e.operation_id for e in events}) == count


async def _sessions_at_the_standby(
    sync: PurgatoryClient, reader: AsyncPurgatoryClient, owner: str
) -> None:
    """Sessions opened at the standby: sync, then async; both routed to ``owner``."""
    outcomes: queue.SimpleQueue[Event] = queue.SimpleQueue()
    with sync.session(on_outcome=outcomes.put) as session:
        ack = await asyncio.to_thread(
            session.send, watches=[OperationSpec(("s1",), 60_000, operation_id="sess-1")]
        )
        assert ack.error is None and ack.operations[0].created
        ack = await asyncio.to_thread(session.send, signals=["s1"])
        assert ack.error is None and ack.completed_per_signal == (1,)
        assert (await asyncio.to_thread(outcomes.get, True, 10)).operation_id == "sess-1"
    assert sync._router.routes == {NAME: owner}
    async with reader.session() as asession:
        ack = await asession.send(
            watches=[OperationSpec(("s2",), 60_000, operation_id="sess-2")],
        )
        assert ack.error is None and ack.operations[0].created
        assert (await asession.send(signals=["s2"])).completed_per_signal == (1,)
        async for event in asession.outcomes():
            assert event.operation_id == "sess-2"
            break


async def _fresh_clients_at_the_standby(
    standby: str, owner: str, writer: AsyncPurgatoryClient
) -> None:
    # watch_many of a client that knows no route yet (its session finds the owner).
    async with AsyncPurgatoryClient(standby, purgatory=NAME, timeout=10) as fresh:
        ops = [OperationSpec(("w",), 300, operation_id="wm-1")]
        assert [e.operation_id async for e in fresh.watch_many(ops)] == ["wm-1"]
        assert fresh._router.routes == {NAME: owner}
    # A worker-group member joining at B joins at A, and acks there.
    async with AsyncPurgatoryClient(standby, purgatory=NAME, timeout=10) as member:
        stream = await member.join_group("g")
        assert member._router.routes == {NAME: owner}
        await _complete(writer, 100, 1)
        delivery = await asyncio.wait_for(anext(stream), 10)
        assert delivery.operation_id == "op100"
        await delivery.ack()
        await stream.aclose()


async def _blind_watch_many(standby: str, owner: str) -> None:
    """Without the probe (the client believes B serves it): B refuses the session's
    frame, ending the stream UNAVAILABLE + owner; watch_many re-opens it at A."""
    with PurgatoryClient(standby, purgatory=NAME, timeout=10) as blind:
        blind._router.probed(NAME)
        ops = [OperationSpec(("w",), 300, operation_id="wm-2")]
        done = await asyncio.to_thread(lambda: [e.operation_id for e in blind.watch_many(ops)])
        assert done == ["wm-2"] and blind._router.routes == {NAME: owner}


async def _hand_over_under_a_sync_subscriber(
    b: ReplicatedServer, a2: ReplicatedServer
) -> list[Event]:
    """Graceful hand-over B -> A2, with a sync subscriber routed from A2 to B; the events it
    saw."""
    seen: list[Event] = []
    sub = PurgatoryClient(a2.address, purgatory=NAME, timeout=10)

    def sync_subscribe() -> None:
        try:
            for event in sub.subscribe(after_sequence=0):
                seen.append(event)
        except (PurgatoryError, ValueError):
            pass  # the client was closed at the end of the test

    thread = threading.Thread(target=sync_subscribe, daemon=True)
    thread.start()
    try:
        await _until(seen, 11)
        b.stop()
        await wait_owner([a2], NAME, 30)
        async with AsyncPurgatoryClient(a2.address, purgatory=NAME, timeout=10) as writer2:
            await _complete(writer2, 10, 3)
        await _until(seen, 14)
    finally:
        sub.close()
        thread.join(10)
    return seen


async def test_streams_follow_the_owner_across_kill_and_hand_over(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    # A ranks first, B second, A's replacement last: only the test moves the purgatory.
    ids = by_rank(NAME, 3)
    a = ReplicatedServer(tmp_path, "a", nats_cluster.urls, NAME, ids[0])
    a.wait_port()
    assert await wait_owner([a], NAME, 30) == 0
    b = ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, ids[1])
    b.wait_port()
    a2: ReplicatedServer | None = None
    writer = AsyncPurgatoryClient(b.address, purgatory=NAME, timeout=10)
    reader = AsyncPurgatoryClient(b.address, purgatory=NAME, timeout=10)
    sync = PurgatoryClient(b.address, purgatory=NAME, timeout=10)
    events: list[Event] = []

    async def subscribe() -> None:
        async for event in reader.subscribe(after_sequence=0):
            events.append(event)

    task = asyncio.ensure_future(subscribe())
    try:
        await _complete(writer, 0, 3)
        await _until(events, 3)
        assert reader._router.routes == {NAME: a.address}
        await _sessions_at_the_standby(sync, reader, a.address)
        await _fresh_clients_at_the_standby(b.address, a.address, writer)
        await _until(events, 7)
        await _blind_watch_many(b.address, a.address)
        await _until(events, 8)

        # kill -9 of the owner: B takes over, the subscriber resumes there.
        a.kill()
        await wait_owner([b], NAME, 30)
        await _complete(writer, 7, 3)
        await _until(events, 11)
        _gap_free(events, 11)

        a2 = ReplicatedServer(tmp_path, "a2", nats_cluster.urls, NAME, ids[2])
        a2.wait_port()
        seen = await _hand_over_under_a_sync_subscriber(b, a2)
        _gap_free(seen, 14)
        assert [e.operation_id for e in seen[:11]] == [e.operation_id for e in events]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await writer.close()
        await reader.close()
        sync.close()
        for server in (a, b, a2):
            if server is not None:
                server.stop()
