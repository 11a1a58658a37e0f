"""A paused owner is fenced: after SIGSTOP past its lease and SIGCONT it never appends again.

Server A owns purgatory ``fenced`` and holds operations due while it is paused; B stands
by. A is stopped (SIGSTOP) for longer than the lease, B takes over (it fences A by
appending with the subject's last sequence) and expires the operations that fell due. A
is resumed (SIGCONT) with a signal call already waiting for it and its own timers now
overdue. Then:

- the waiting call and every later call on A fail UNAVAILABLE, and A names B in the
  ``purgatory-owner`` trailer;
- the stream holds no message of A's epoch after B's fence, and each operation has
  exactly one outcome in B's history.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
import nats
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.layout import EPOCH_HEADER, journal_stream, journal_subject
from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.shadow import decode_message

from tests.cluster.servers import LEASE_MS, ReplicatedServer, by_rank, stub, wait_owner

NAME = "fenced"
STREAMS = 2  # tests/cluster/servers.py: journal_streams


async def _messages(urls: list[str]) -> list[tuple[int, int, list[Any]]]:
    """(stream sequence, epoch, records) of every message on the purgatory's subject."""
    nc = await nats.connect(servers=urls)
    try:
        js = nc.jetstream()
        stream, subject = journal_stream(NAME, STREAMS), journal_subject(NAME, STREAMS)
        info = await js.stream_info(stream, subjects_filter=subject)
        total = (info.state.subjects or {}).get(subject, 0)
        sub = await js.subscribe(subject, ordered_consumer=True)
        out = []
        for _ in range(total):
            msg = await sub.next_msg(5)
            epoch = int((msg.headers or {}).get(EPOCH_HEADER, "0"))
            out.append((msg.metadata.sequence.stream, epoch, decode_message(msg.data)))
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def _check_fenced(waiting: Any, client_a: Any, owner: str) -> None:
    """A, resumed: the write queued while it was paused fails, and so does any call after
    its timers and renewal loop have run, naming the new owner."""
    try:
        await waiting
        raise AssertionError("the paused owner answered a write after it was replaced")
    except grpc.aio.AioRpcError as exc:
        assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
    await asyncio.sleep(LEASE_MS / 1000)  # A's timers and renewal loop have run
    try:
        await client_a.GetPurgatory(pb.GetPurgatoryRequest(name=NAME), timeout=10)
        raise AssertionError("the replaced owner still serves the purgatory")
    except grpc.aio.AioRpcError as exc:
        assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
        trailers = dict(exc.trailing_metadata() or ())
        assert trailers.get("purgatory-owner") == owner, trailers


async def _check_history(client_b: Any) -> None:
    """B's history: each operation has one outcome; the short ones expired at B."""
    info = (await client_b.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
    events = []
    call = client_b.Subscribe(pb.SubscribeRequest(purgatory=NAME, after_sequence=0))
    async for event in call:
        events.append(event)
        if len(events) == info.last_sequence:
            break
    call.cancel()
    ids = [e.operation_id for e in events]
    assert len(ids) == len(set(ids)), ids
    assert {f"op{i}" for i in range(1, 20, 2)} <= set(ids), ids


async def test_paused_owner_is_fenced_and_stops_answering(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    # Placement ranks B first, so A never takes the purgatory back once resumed; A, alone
    # at first, owns it until it is paused (a hand-over to B waits for B to be live two
    # leases, and the calls before the pause take a fraction of that).
    first, second = by_rank(NAME, 2)
    a = ReplicatedServer(tmp_path, "a", nats_cluster.urls, NAME, second)
    a.wait_port()
    assert await wait_owner([a], NAME, 30) == 0
    b = ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, first)
    b.wait_port()
    channel_a, client_a = stub(a.address)
    channel_b, client_b = stub(b.address)
    try:
        pause_s = LEASE_MS / 1000 * 3
        for i in range(20):
            due = 600 if i % 2 else 60_000  # half fall due while A is paused
            await client_a.TryCompleteElseWatch(
                pb.TryCompleteElseWatchRequest(
                    purgatory=NAME, operation_id=f"op{i}", keys=[f"k{i % 3}"], timeout_ms=due
                )
            )
        await client_a.CheckAndComplete(pb.CheckAndCompleteRequest(purgatory=NAME, key="k0"))
        a.pause()
        paused = time.monotonic()
        await wait_owner([b], NAME, 30)  # B took over and fenced A
        await asyncio.sleep(max(0.0, pause_s - (time.monotonic() - paused)))
        waiting = asyncio.ensure_future(
            client_a.CheckAndComplete(
                pb.CheckAndCompleteRequest(purgatory=NAME, key="k1"), timeout=20
            )
        )
        await asyncio.sleep(0.2)  # the call is queued at A's socket before it resumes
        a.resume()
        await _check_fenced(waiting, client_a, b.address)

        await _check_history(client_b)
    finally:
        await channel_a.close()
        await channel_b.close()
        a.stop()
        b.stop()

    # The stream: after B's fence (the first message of B's epoch), nothing of A's.
    messages = await _messages(nats_cluster.urls)
    epochs = [epoch for _, epoch, _ in messages]
    a_epoch, b_epoch = epochs[0], max(epochs)
    assert a_epoch < b_epoch, epochs
    fence = epochs.index(b_epoch)
    assert all(epoch >= b_epoch for epoch in epochs[fence:]), epochs
    outcomes = [
        r.outcome.operation_id
        for _, _, records in messages
        for r in records
        if r.WhichOneof("record") == "outcome"
    ]
    assert len(outcomes) == len(set(outcomes)), outcomes
