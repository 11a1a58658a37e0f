"""The owner's log writes snapshots through JetStream; readers take complete ones only.

In-process against the session's NATS cluster: a :class:`ReplicatedLog` with a
``SubjectReplay`` mirror and ``snapshot_messages = 5`` appends registrations and outcomes
one message at a time. Its writer must snapshot and purge, and a standby started
afterwards must find the subject starting at a begin and rebuild the mirror's state.
Then the owner starts a snapshot it never finishes, a new owner fences and appends: a
standby replaying the subject ignores the unfinished snapshot, and the stale owner can
append no snapshot message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import nats
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._cluster.layout import SNAPSHOT_HEADER
from purgatory_server._cluster.log import ReplicatedLog
from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.shadow import Shadow, last_subject_sequence
from purgatory_server._cluster.snapshot import (
    SnapshotBuilder,
    SnapshotPolicy,
    SubjectReplay,
    marker,
)
from purgatory_server._service.model.errors import NotOwner

from tests.cluster.servers import add_r3_stream

STREAM = "PURGATORY_SNAPTEST"
SUBJECT = "purgatory.snaptest.p"


def _registered(op_id: str) -> JournalRecord:
    record = JournalRecord()
    record.registered.purgatory = "p"
    record.registered.operation_id = op_id
    record.registered.keys.append(f"k-{op_id}")
    record.registered.due_wall_ms = 10**13
    return record


def _outcome(op_id: str, sequence: int) -> JournalRecord:
    record = JournalRecord()
    record.outcome.operation_id = op_id
    record.outcome.sequence = sequence
    record.outcome.state = JournalRecord.Outcome.STATE_FORCE_COMPLETED
    return record


def _log(js: Any, epoch: int, last: int, replay: SubjectReplay) -> ReplicatedLog:
    return ReplicatedLog(
        js,
        name="p",
        stream=STREAM,
        subject=SUBJECT,
        msg_id_prefix="p",
        epoch=epoch,
        last_sequence=last,
        recovered=replay.state.snapshot(replay.next_index),
        loop=asyncio.get_running_loop(),
        lease_valid=lambda: True,
        on_lost=lambda _reason: None,
        not_owner=lambda: NotOwner("p", "elsewhere:1", epoch + 1),
        append_timeout_s=20.0,
        replay=replay,
        snapshot_policy=SnapshotPolicy(messages=5, bytes=0),
    )


async def _standby(js: Any) -> Shadow:
    shadow = Shadow(js, STREAM, SUBJECT, 10, 1000)
    await shadow.start()
    await shadow.catch_up(await last_subject_sequence(js, STREAM, SUBJECT), 20)
    await shadow.stop()
    return shadow


def _same(a: SubjectReplay, b: SubjectReplay) -> None:
    left, right = a.state.snapshot(0), b.state.snapshot(0)
    assert dict(left.pending) == dict(right.pending)
    assert (left.last_sequence, left.events) == (right.last_sequence, right.events)


async def test_log_snapshots_purges_and_unfinished_snapshots_are_ignored(
    nats_cluster: LocalNatsCluster,
) -> None:
    nc = await nats.connect(servers=nats_cluster.urls)
    try:
        js = nc.jetstream(timeout=10)
        await add_r3_stream(js, STREAM, ["purgatory.snaptest.*"])
        mirror = SubjectReplay(10, 1000)
        owner = _log(js, 1, 0, mirror)
        assert owner.snapshots is not None
        for i in range(60):
            records = [_registered(f"op{i}")]
            if i % 3 == 2:
                records.append(_outcome(f"op{i - 1}", i // 3 + 1))
            await asyncio.wrap_future(owner.submit(records))
        # The last snapshot's parts and purge: waited for, however slow the machine (a
        # standby read while one is still being written would see two snapshots).
        deadline = asyncio.get_running_loop().time() + 60
        while owner.snapshots.busy and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert not owner.snapshots.busy
        assert owner.snapshots.written >= 3
        first = await js.get_msg(STREAM, seq=1, subject=SUBJECT, next=True)
        assert (first.headers or {}).get(SNAPSHOT_HEADER, "").startswith("begin 1.")
        assert int(first.seq) == owner.snapshots.purged_before > 1
        fresh = await _standby(js)
        assert fresh.replay.snapshots == 1 and fresh.messages < 60
        _same(fresh.replay, mirror)

        # An unfinished snapshot, then a new owner (epoch 2) fences and appends.
        builder = SnapshotBuilder(mirror.state, 100)
        for i, body in enumerate(builder.begin()):
            await asyncio.wrap_future(
                owner.submit_marked(body, marker("begin" if i == 0 else "part", "1.99"))
            )
        part = builder.next_part()
        assert part is not None
        await asyncio.wrap_future(owner.submit_marked(part, marker("part", "1.99")))
        await asyncio.wrap_future(owner.submit([_outcome("op0", 100)]))
        standby = await _standby(js)
        assert standby.replay.in_snapshot
        new_owner = _log(js, 2, standby.applied_sequence, standby.replay)
        assert not standby.replay.in_snapshot  # the new owner's mirror dropped it
        await asyncio.wrap_future(new_owner.submit([_registered("after")]))
        stale = owner.submit_marked(b"", marker("end", "1.99"))
        try:
            await asyncio.wrap_future(stale)
            raise AssertionError("the stale owner appended a snapshot message")
        except NotOwner:
            pass
        replayed = await _standby(js)
        assert replayed.replay.snapshots == 1 and not replayed.replay.in_snapshot
        _same(replayed.replay, standby.replay)
        assert "after" in replayed.replay.state.pending
        assert "op0" not in replayed.replay.state.pending
        await new_owner.drain()
        await owner.drain()
    finally:
        await nc.close()
