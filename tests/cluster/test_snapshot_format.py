"""Snapshots of a subject without NATS: chunking, markers, and what a reader rebuilds.

A simulated owner applies random submissions (registrations, signals with and without
values, reschedules, outcomes, a re-registered id, schedules, a worker group) to its
:class:`SubjectReplay` and "appends" each to a list standing for the subject, with the
headers the log would send. A snapshot's parts are built between submissions, as the
owner's writer builds them. A reader that starts at the snapshot's begin (the subject
after the purge) and one that reads everything must both end with the owner's state;
an unfinished snapshot must change nothing.
"""

from __future__ import annotations

import random

import pytest
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._cluster import snapshot as snapshot_module
from purgatory_server._cluster.layout import EPOCH_HEADER, MAX_MESSAGE_BYTES, SNAPSHOT_HEADER
from purgatory_server._cluster.snapshot import (
    SnapshotBuilder,
    SnapshotPolicy,
    SubjectReplay,
    decode_message,
    marker,
)
from purgatory_server._journal import RecoveredState
from purgatory_server._journal.framing import encode_frame

Message = tuple[bytes, dict[str, str]]
RETAIN = 20


class Owner:
    """Random submissions applied to a replay and appended to a list (the subject)."""

    def __init__(self, seed: int, epoch: int = 1) -> None:
        self.rng = random.Random(seed)
        self.replay = SubjectReplay(RETAIN, 1000)
        self.subject: list[Message] = []
        self.epoch = epoch
        self.pending: list[str] = []
        self.ended: list[str] = []
        self.sequence = 0
        self.serial = 0

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {EPOCH_HEADER: str(self.epoch), **(extra or {})}

    def submit(self, records: list[JournalRecord]) -> None:
        self.replay.apply_records(records)
        body = b"".join(encode_frame(r.SerializeToString()) for r in records)
        self.subject.append((body, self.headers()))
        self.replay.tail_messages += 1  # as the writer counts an acknowledged message
        self.replay.tail_bytes += len(body)

    def mark(self, body: bytes, phase: str, snapshot_id: str) -> None:
        self.subject.append((body, self.headers(marker(phase, snapshot_id))))

    def _register(self, op_id: str) -> JournalRecord:
        record = JournalRecord()
        reg = record.registered
        reg.purgatory, reg.operation_id = "p", op_id
        reg.keys.extend(self.rng.sample(["a", "b", "c", "d", "e"], self.rng.randint(1, 2)))
        reg.due_wall_ms = 10**12 + self.rng.randrange(10**6)
        reg.payload = bytes(self.rng.randrange(256) for _ in range(40))
        self.pending.append(op_id)
        return record

    def random_submission(self) -> None:
        rng = self.rng
        records: list[JournalRecord] = []
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            if roll < 0.4 or not self.pending:
                if self.ended and rng.random() < 0.1:  # an id that ended starts again
                    op_id = self.ended.pop(rng.randrange(len(self.ended)))
                else:
                    self.serial += 1
                    op_id = f"op{self.serial}"
                records.append(self._register(op_id))
            elif roll < 0.65:
                record = JournalRecord()
                sig = record.signal
                sig.purgatory, sig.key, sig.amount = "p", rng.choice("abcdef"), 1
                if rng.random() < 0.5:
                    sig.value = rng.randrange(1000)
                records.append(record)
            elif roll < 0.75:
                record = JournalRecord()
                moved = record.rescheduled
                moved.purgatory, moved.operation_id = "p", rng.choice(self.pending)
                moved.due_wall_ms = 2 * 10**12 + rng.randrange(10**6)
                records.append(record)
            else:
                op_id = self.pending.pop(rng.randrange(len(self.pending)))
                self.ended.append(op_id)
                self.sequence += 1
                record = JournalRecord()
                out = record.outcome
                out.purgatory, out.operation_id, out.sequence = "p", op_id, self.sequence
                out.state = JournalRecord.Outcome.STATE_COMPLETED
                records.append(record)
        self.submit(records)

    def side_records(self) -> None:
        """A schedule (upserted, replaced, one deleted) and a worker group with entries."""
        for sid in ("s1", "s2"):
            record = JournalRecord()
            record.schedule_upserted.purgatory = "p"
            record.schedule_upserted.schedule_id = sid
            record.schedule_upserted.definition = sid.encode() * 3
            self.submit([record])
        deleted = JournalRecord()
        deleted.schedule_deleted.schedule_id = "s2"
        group = JournalRecord()
        group.group_state.purgatory, group.group_state.group = "p", "g"
        group.group_state.last_sequence = self.sequence
        group.group_state.max_attempts = 3
        group.group_state.backoff_type = 2
        group.group_state.backoff_delay_ms = 250
        self.submit([deleted, group])

    def group_waits(self) -> None:
        """Nacks (or backoff waits) of the group's first entries: a takeover keeps them."""
        held = sorted(self.replay.state.groups.groups["g"].entries)[:2]
        for n, sequence in enumerate(held, 1):
            record = JournalRecord()
            wait = record.group_retry
            wait.purgatory, wait.group, wait.sequence = "p", "g", sequence
            wait.attempt, wait.retry_at_wall_ms = n, 1_000_000 + n
            self.submit([record])

    def snapshot(self, snapshot_id: str, interleave: int, chunk_bytes: int) -> int:
        """Write a snapshot with up to ``interleave`` submissions between its parts; the
        index of its begin in the subject."""
        builder = SnapshotBuilder(self.replay.state, chunk_bytes)
        begin = len(self.subject)
        for i, body in enumerate(builder.begin()):
            self.mark(body, "begin" if i == 0 else "part", snapshot_id)
        while (part := builder.next_part()) is not None:
            self.mark(part, "part", snapshot_id)
            for _ in range(self.rng.randint(0, interleave)):
                self.random_submission()
        self.mark(builder.end(begin + 1), "end", snapshot_id)
        self.replay.completed(builder.bytes)
        return begin


def read(messages: list[Message]) -> SubjectReplay:
    replay = SubjectReplay(RETAIN, 1000)
    for body, headers in messages:
        replay.apply(body, headers)
    return replay


def comparable(state: RecoveredState) -> dict[str, object]:
    """What a takeover restores, less the bookkeeping a carry changes (source_index,
    carried) and the ended ids (a snapshot keeps those of the window only)."""
    schedules = {sid: (u.definition, u.purgatory) for sid, u in state.schedules.items()}
    groups = {
        name: (g.state.max_attempts, g.state.backoff_delay_ms, g.last_sequence, g.entries)
        for name, g in state.groups.items()
    }
    return {
        "pending": dict(state.pending),
        "key_values": dict(state.key_values),
        "last_sequence": state.last_sequence,
        "events": state.events,
        "schedules": schedules,
        "groups": groups,
    }


def snap(replay: SubjectReplay) -> dict[str, object]:
    return comparable(replay.state.snapshot(replay.next_index))


@pytest.mark.parametrize("seed", range(6))
def test_snapshot_between_submissions_rebuilds_the_owner_state(seed: int) -> None:
    owner = Owner(seed)
    for i in range(300):
        owner.random_submission()
        if i == 100:
            owner.side_records()
        if i == 200:
            owner.group_waits()
    begin = owner.snapshot("1.1", interleave=3, chunk_bytes=600)
    for _ in range(50):
        owner.random_submission()
    parts = sum(1 for _, h in owner.subject if h.get(SNAPSHOT_HEADER, "").startswith("part"))
    assert parts >= 3, "the snapshot should have been chunked"
    expected = snap(owner.replay)
    assert expected["pending"] and expected["events"] and expected["groups"]
    waits = [e.retry_at_wall_ms for e in owner.replay.state.snapshot(0).groups["g"].entries]
    assert waits[:2] == [1_000_001, 1_000_002]

    after_purge = read(owner.subject[begin:])
    assert after_purge.snapshots == 1
    assert snap(after_purge) == expected
    window_ids = {o.operation_id for o in owner.replay.state.events_window()}
    owner_ended = owner.replay.state.snapshot(0).ended
    assert after_purge.state.snapshot(0).ended >= window_ids & owner_ended
    whole = read(owner.subject)
    assert whole.snapshots == 1
    assert snap(whole) == expected
    # The tail counts restart at the end marker (what the policy decides on).
    assert after_purge.tail_messages == whole.tail_messages == owner.replay.tail_messages == 50
    assert after_purge.tail_bytes == whole.tail_bytes == owner.replay.tail_bytes


def test_unfinished_snapshot_is_ignored() -> None:
    owner = Owner(7)
    for _ in range(200):
        owner.random_submission()
    builder = SnapshotBuilder(owner.replay.state, 400)
    for i, body in enumerate(builder.begin()):
        owner.mark(body, "begin" if i == 0 else "part", "1.1")
    part = builder.next_part()
    assert part is not None
    owner.mark(part, "part", "1.1")
    owner.random_submission()
    # The owner dies; a new one fences (an empty message of its epoch) and goes on.
    owner.epoch = 2
    owner.subject.append((b"", owner.headers()))
    for _ in range(30):
        owner.random_submission()
    whole = read(owner.subject)
    assert whole.snapshots == 0 and not whole.in_snapshot
    assert snap(whole) == snap(owner.replay)
    # Parts and an end without their begin (or of another snapshot) change nothing.
    stray = read([*owner.subject, (part, owner.headers(marker("end", "1.1")))])
    assert stray.snapshots == 0
    assert snap(stray) == snap(owner.replay)


def test_a_large_window_is_split_into_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_module, "MAX_MESSAGE_BYTES", 2000)
    owner = Owner(3)
    owner.replay = SubjectReplay(10_000, 1000)
    for _ in range(400):
        owner.random_submission()
    bodies = SnapshotBuilder(owner.replay.state).begin()
    assert len(bodies) > 3
    assert all(len(b) <= 2000 for b in bodies)
    window = [r.outcome for body in bodies for r in decode_message(body) if r.HasField("outcome")]
    assert window == owner.replay.state.events_window()


def test_real_sizes_stay_under_a_message() -> None:
    owner = Owner(11)
    for _ in range(2000):
        owner.random_submission()
    builder = SnapshotBuilder(owner.replay.state)
    sizes = [len(b) for b in builder.begin()]
    while (part := builder.next_part()) is not None:
        sizes.append(len(part))
    assert max(sizes) <= MAX_MESSAGE_BYTES
    assert builder.carried_operations == len(owner.replay.state.pending)


def test_policy() -> None:
    replay = SubjectReplay(10, 10)
    assert not SnapshotPolicy(0, 0).enabled
    policy = SnapshotPolicy(messages=5, bytes=0)
    replay.tail_messages, replay.tail_bytes, replay.snapshot_bytes = 4, 10_000, 0
    assert not policy.due(replay)
    replay.tail_messages = 5
    assert policy.due(replay)
    replay.snapshot_bytes = 20_000  # the last snapshot was larger than the tail: wait
    assert not policy.due(replay)
    by_bytes = SnapshotPolicy(messages=0, bytes=1000)
    replay.tail_messages, replay.tail_bytes, replay.snapshot_bytes = 10**6, 999, 0
    assert not by_bytes.due(replay)
    replay.tail_bytes = 1000
    assert by_bytes.due(replay)


def test_a_snapshot_carries_the_dedup_window() -> None:
    """Finished ids a re-send must still find (the dedup window, docs/service.md) survive
    a snapshot and the purge before it, not only the retained event window's: a takeover
    answers a re-send inside the window with its outcome, as a local restart does."""
    dedup = (300_000, 1 << 20)
    owner = Owner(5)
    owner.replay = SubjectReplay(RETAIN, 1000, dedup)
    for _ in range(300):
        owner.random_submission()
    begin = owner.snapshot("1.1", interleave=2, chunk_bytes=600)
    # What the server's finished-id memory is rebuilt from: an id's latest outcome wins,
    # and an id pending again answers re-sends itself (it is carried, not remembered).
    owner_state = owner.replay.state.snapshot(owner.replay.next_index)
    pending = owner_state.pending
    expected = {o.operation_id: o for o in owner_state.finished if o.operation_id not in pending}
    assert len(expected) > RETAIN  # more than the event window holds
    after_purge = SubjectReplay(RETAIN, 1000, dedup)
    for body, headers in owner.subject[begin:]:
        after_purge.apply(body, headers)
    assert after_purge.snapshots == 1
    rebuilt = after_purge.state.snapshot(after_purge.next_index)
    assert {o.operation_id: o for o in rebuilt.finished if o.operation_id not in pending} == (
        expected
    )
    assert rebuilt.events == owner_state.events


def test_a_snapshot_carries_a_groups_selection_and_rate_windows() -> None:
    """A takeover keeps a worker group's delivery selection and its rate windows (the
    delivery times per rate key, those before the snapshot included)."""
    owner = Owner(7)
    group = JournalRecord()
    state = group.group_state
    state.purgatory, state.group, state.max_attempts = "p", "g", 3
    state.selection = b"\x1a\x06\x08\x02\x10\xe8\x07"  # opaque here (a GroupSelection)
    state.rate_window_ms = 300  # times more than 300 ms before the latest one leave
    owner.submit([group])

    def delivered(n: int) -> JournalRecord:
        record = JournalRecord()
        d = record.group_delivered
        d.purgatory, d.group, d.sequence, d.attempt = "p", "g", 1, n
        d.delivered_wall_ms, d.rate_key = 10**12 + 100 * n, "ab"[n % 2]
        return record

    for n in range(1, 6):
        owner.random_submission()
        owner.submit([delivered(n)])
    begin = owner.snapshot("1.1", interleave=2, chunk_bytes=600)
    owner.submit([delivered(6)])

    def windows(replay: SubjectReplay) -> tuple[bytes, dict[str, list[int]]]:
        (g,) = replay.state.snapshot(replay.next_index).groups.values()
        return g.state.selection, {w.key: list(w.delivered_wall_ms) for w in g.rate_windows}

    expected = windows(owner.replay)
    t = 10**12
    assert expected == (state.selection, {"a": [t + 400, t + 600], "b": [t + 500]})
    assert windows(read(owner.subject[begin:])) == expected
    assert windows(read(owner.subject)) == expected
