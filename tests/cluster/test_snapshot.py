"""Snapshots bound a replicated purgatory's subject; a fresh standby rebuilds from them.

A server owns purgatory ``snap`` with ``snapshot_messages = 25`` and a retained window
of 30 events. Rounds of registrations (a private key each, ``MIN_SIGNALS(3)``, so
signals leave progress), signals with and without values, and force-completes append
over 700 messages one RPC at a time; the subject must stay bounded (snapshots
and purges) and start at a snapshot's begin. Then a *fresh* server starts (its standby
can only replay the snapshot and the tail: the rest is purged), the owner is killed with
SIGKILL, and the new owner must show exactly what the old one showed: every operation's
state, progress, due time and payload, the last sequence, the retained window and the
incarnation. The new owner then snapshots too (its epoch names the subject's first
message).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import grpc
import nats
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.layout import SNAPSHOT_HEADER, journal_stream, journal_subject
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import ReplicatedServer, by_rank, stub, wait_owner

NAME = "snap"
SNAPSHOT_MESSAGES = 25
RETAIN = 30
ROUNDS = 30
# Snapshot (window + ~24 pending, a few messages) plus a tail of at least 25 messages
# that must outweigh it in bytes: about 60 for this load, which appends over 700.
BOUND = 120


async def _subject(js: Any) -> tuple[int, str]:
    """(messages of the subject, snapshot header of its first message)."""
    stream, subject = journal_stream(NAME, 2), journal_subject(NAME, 2)
    info = await js.stream_info(stream, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    first = await js.get_msg(stream, seq=1, subject=subject, next=True)
    return count, (first.headers or {}).get(SNAPSHOT_HEADER, "")


async def _load(client: Any, round_no: int, ids: list[str]) -> None:
    for i in range(8):
        op_id = f"r{round_no}-{i}"
        condition = pb.Condition(min_signals=pb.MinSignalsCondition(count=3))
        if i == 7:  # a values condition on a shared key with a value
            condition = pb.Condition(
                values_at_least=pb.ValuesAtLeastCondition(default_target=10**9)
            )
        await client.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory=NAME,
                operation_id=op_id,
                keys=["v"] if i == 7 else [f"p-{op_id}"],
                timeout_ms=600_000,
                condition=condition,
                payload=op_id.encode() * 4,
            )
        )
        ids.append(op_id)
    for op_id in ids[-16:-8]:  # progress on the previous round's operations
        if not op_id.endswith("-7"):
            await client.CheckAndComplete(
                pb.CheckAndCompleteRequest(
                    purgatory=NAME, key=f"p-{op_id}", signal=pb.Signal(amount=1, source="s")
                )
            )
    await client.CheckAndComplete(
        pb.CheckAndCompleteRequest(
            purgatory=NAME, key="v", signal=pb.Signal(amount=1, value=round_no)
        )
    )
    for op_id in ids[-24:-16]:  # they end (round 0's stay): a state of constant size
        if op_id.startswith("r0-"):
            continue
        await client.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id=op_id))


async def _view(address: str, ids: list[str]) -> tuple[Any, dict[str, Any], list[Any]]:
    """What a client can see: the purgatory, every operation, the retained window."""
    channel, client = stub(address)
    try:
        info = (await client.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
        statuses = {}
        for op_id in ids:
            try:
                response = await client.GetOperation(
                    pb.GetOperationRequest(purgatory=NAME, operation_id=op_id)
                )
                statuses[op_id] = response.operation
            except grpc.aio.AioRpcError as exc:  # ended, and its outcome left the window
                assert exc.code() is grpc.StatusCode.NOT_FOUND, exc
                statuses[op_id] = None
        events = []
        call = client.Subscribe(
            pb.SubscribeRequest(purgatory=NAME, after_sequence=info.oldest_sequence - 1),
            timeout=30,
        )
        async for event in call:
            events.append((event.sequence, event.operation_id, event.state))
            if event.sequence >= info.last_sequence:
                break
        call.cancel()
        return info, statuses, events
    finally:
        await channel.close()


def _check_same_view(before: Any, after: Any) -> None:
    """The fresh owner's view (rebuilt from the snapshot and the tail) is the old one's."""
    info = before[0]
    assert after[0].incarnation == info.incarnation
    for field in ("pending", "watched_keys", "last_sequence", "oldest_sequence"):
        assert getattr(after[0], field) == getattr(info, field), field
    assert after[2] == before[2]
    for op_id, status in before[1].items():
        if status is not None and 0 < status.sequence < info.oldest_sequence:
            # Ended before the window: a restart keeps no status for it (nor does a
            # local journal's recovery); the owner still had it in memory.
            assert after[1][op_id] in (None, status), op_id
        else:
            assert after[1][op_id] == status, op_id


async def _check_new_owner_snapshots(address: str, js: Any, ids: list[str], first: str) -> None:
    """The new owner snapshots too, under its own epoch."""
    channel, client = stub(address)
    try:
        for round_no in range(ROUNDS, ROUNDS + 8):
            await _load(client, round_no, ids)
    finally:
        await channel.close()
    count, first_after = await _subject(js)
    assert count <= BOUND
    assert first_after.startswith("begin "), first_after
    assert first_after.split()[1].split(".")[0] != first.split()[1].split(".", maxsplit=1)[0]


async def test_snapshots_bound_the_subject_and_a_fresh_standby_rebuilds_from_them(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    config: dict[str, Any] = {
        "retained_events": RETAIN,
        # The bound below is the event window's: with the dedup window on (5 minutes by
        # default) a snapshot also carries every id ended in it (test_snapshot_format).
        "dedup_window_ms": 0,
        "cluster_extra": f"snapshot_messages = {SNAPSHOT_MESSAGES}\n",
    }
    first, second = by_rank(NAME, 2)  # B never takes the purgatory from A by placement
    servers = [ReplicatedServer(tmp_path, "a", nats_cluster.urls, NAME, first, **config)]
    nc = await nats.connect(servers=nats_cluster.urls)
    try:
        js = nc.jetstream(timeout=10)
        servers[0].wait_port()
        await wait_owner(servers, NAME, 30)
        channel, client = stub(servers[0].address)
        ids: list[str] = []
        counts = []
        try:
            for round_no in range(ROUNDS):
                await _load(client, round_no, ids)
                counts.append((await _subject(js))[0])
        finally:
            await channel.close()
        count, first = await _subject(js)
        assert first.startswith("begin "), f"the subject was never purged: {first!r}"
        assert max(counts) <= BOUND, counts
        before = await _view(servers[0].address, ids)
        info = before[0]
        assert info.pending >= 16 and info.last_sequence > RETAIN, info
        assert len(before[2]) == RETAIN
        assert sum(1 for st in before[1].values() if st is not None and st.result.signal_count)

        # A fresh standby: all it can replay is the snapshot and the tail.
        servers.append(ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, second, **config))
        servers[1].wait_port()
        await asyncio.sleep(1.0)  # let it start tailing (takeover would wait for it anyway)
        servers[0].kill()
        await wait_owner(servers, NAME, 30)
        _check_same_view(before, await _view(servers[1].address, ids))
        tailed = re.search(r"(\d+) messages tailed", servers[1].log_text())
        assert tailed is not None, servers[1].log_text()[-3000:]
        assert int(tailed.group(1)) <= count + 2, (tailed.group(0), count)

        await _check_new_owner_snapshots(servers[1].address, js, ids, first)
    except (AssertionError, grpc.aio.AioRpcError) as exc:
        logs = "\n".join(f"--- {s.label}\n{s.log_text()[-3000:]}" for s in servers)
        raise AssertionError(f"{exc}\n{logs}") from exc
    finally:
        for server in servers:
            server.stop()
        await nc.close()
