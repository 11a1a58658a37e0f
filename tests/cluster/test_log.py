"""The replicated log against a real JetStream cluster: group commit, fencing, replay.

In-process (no purgatory server): two :class:`ReplicatedLog` writers on one subject
stand for an old and a new owner. Checks that concurrent submissions share messages and
resolve in order, that a standby's :class:`Shadow` replays them into the same journal
state local recovery builds, and that once a new owner appends its fence, the old
owner's next append is rejected, fails with UNAVAILABLE, and fences that log for good.
"""

from __future__ import annotations

import asyncio
from typing import Any

import nats
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._cluster.log import ReplicatedLog
from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.shadow import Shadow, last_subject_sequence
from purgatory_server._journal import JournalState
from purgatory_server._service.model.errors import Code, NotOwner

from tests.cluster.servers import add_r3_stream

STREAM = "PURGATORY_LOGTEST"
SUBJECT = "purgatory.logtest.p"


def _registered(op_id: str) -> JournalRecord:
    record = JournalRecord()
    record.registered.purgatory = "p"
    record.registered.operation_id = op_id
    record.registered.keys.append("k")
    record.registered.due_wall_ms = 10**13
    return record


def _log(js: Any, loop: asyncio.AbstractEventLoop, epoch: int, last: int, lost: list[str]) -> Any:
    return ReplicatedLog(
        js,
        name="p",
        stream=STREAM,
        subject=SUBJECT,
        msg_id_prefix="p",
        epoch=epoch,
        last_sequence=last,
        recovered=JournalState(100).snapshot(0),
        loop=loop,
        lease_valid=lambda: True,
        on_lost=lost.append,
        not_owner=lambda: NotOwner("p", "elsewhere:1", epoch + 1),
        append_timeout_s=20.0,
    )


async def test_group_commit_fencing_and_replay(nats_cluster: LocalNatsCluster) -> None:
    nc = await nats.connect(servers=nats_cluster.urls)
    try:
        js = nc.jetstream(timeout=10)
        await add_r3_stream(js, STREAM, ["purgatory.logtest.*"])
        loop = asyncio.get_running_loop()
        lost_old: list[str] = []
        old = _log(js, loop, 1, 0, lost_old)
        # 200 submissions at once: one in flight, the rest coalesce behind it.
        futures = [old.submit([_registered(f"op{i}")]) for i in range(200)]
        results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        assert results == [1] * 200
        messages = old.last_sequence
        assert messages < 50, f"{messages} messages for 200 submissions: no group commit"

        # A standby replays the subject into the journal state local recovery uses.
        shadow = Shadow(js, STREAM, SUBJECT, 100, 1000)
        await shadow.start()
        last = await last_subject_sequence(js, STREAM, SUBJECT)
        await shadow.catch_up(last, 10)
        assert set(shadow.snapshot().pending) == {f"op{i}" for i in range(200)}
        await shadow.stop()

        # The new owner fences at the last sequence it read.
        new = _log(js, loop, 2, last, [])
        await asyncio.wrap_future(new.submit([_registered("new-owner")]))
        rejected = old.submit([_registered("stale")])
        try:
            await asyncio.wrap_future(rejected)
            raise AssertionError("the stale owner's append was accepted")
        except NotOwner as exc:
            assert exc.code is Code.UNAVAILABLE
        await asyncio.sleep(0)
        assert old.lost is not None and "fenced" in old.lost
        assert lost_old == [old.lost]
        later = old.submit([_registered("later")])
        assert isinstance(later.exception(timeout=1), NotOwner)  # refused without trying
        assert await last_subject_sequence(js, STREAM, SUBJECT) == new.last_sequence
    finally:
        await nc.close()
