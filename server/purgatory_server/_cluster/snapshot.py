"""Snapshots of a replicated purgatory's subject: what one is, how to build and read it.

docs/scale-out.md, "Standbys". JetStream cannot rewrite a subject, so the owner bounds it by
appending a *snapshot* of the state to the same subject, fenced like any append, and
then purging the subject's messages before the snapshot's first one. A snapshot is a run
of messages with the header ``Purgatory-Snapshot: <phase> <id>`` (``id`` is
``<epoch>.<n>``), each holding the local journal's compaction records (docs/journal.md,
"Retention and compaction"), framed as every message is:

- ``begin``: a ``compaction`` checkpoint with the last outcome sequence, then the
  retained event window and the dedup window (finished ids a re-send must still find) as
  ``outcome`` records (split into ``begin`` + ``part`` messages
  queued together if it exceeds a message, so no submission comes between them);
- ``part``: ``carried_operation`` (preceded by the ``registered`` record when the id also
  has an outcome in the window, so the re-registration is not mistaken for a carry of an
  ended operation), ``carried_key_value``, carried ``schedule_upserted``, ``group_state``;
- ``end``: the checkpoint again, naming the ``begin`` message's stream sequence
  (``dropped_before_index``: what the purge removes) and the counts.

**Chunked, without stopping the owner.** Only the begin is built in one go (the window,
bounded by ``retained_events``). The parts are built one at a time, each from the state
*at the moment it is queued*, with ordinary submissions going out between them. The
stream keeps order, so this is a consistent snapshot: a part carries an operation with
all progress submitted before it, and what is submitted after it follows it. Operations
that end before their part is built are not carried (their outcome follows the begin);
operations registered after the begin are not captured (their registration follows it).
Replaying from the begin, into a fresh state, the snapshot's messages and the ordinary
ones between them gives exactly the state the owner had at the end.

**Reading** (:class:`SubjectReplay`): ordinary messages go to the current state; a begin
starts a *candidate* state that gets the snapshot's messages and, too, every ordinary
message; the end replaces the current state by the candidate. A snapshot whose end never
comes (its owner died or was fenced mid-way) is dropped as soon as a message of another
epoch arrives (the new owner's fence); it never replaces anything. A reader that starts
after a purge begins at a complete snapshot's begin.

Pure: no I/O. Thread-safety: none (one thread owns a builder or a replay).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._cluster.layout import EPOCH_HEADER, MAX_MESSAGE_BYTES, SNAPSHOT_HEADER
from purgatory_server._journal import JournalState
from purgatory_server._journal.dedup_window import Dedup
from purgatory_server._journal.framing import decode_frame, encode_frame

__all__ = [
    "CHUNK_BYTES",
    "SnapshotBuilder",
    "SnapshotPolicy",
    "SubjectReplay",
    "decode_message",
    "marker",
    "outcome_frame",
]

logger = logging.getLogger("purgatory_server.cluster")

# A part's size: small enough that building one holds the loop only briefly, large
# enough to keep the parts few.
CHUNK_BYTES = 64 * 1024


def decode_message(data: bytes) -> list[JournalRecord]:
    """The records of one journal message (ValueError if a frame is damaged)."""
    view = memoryview(data)
    records: list[JournalRecord] = []
    offset = 0
    while offset < len(view):
        frame = decode_frame(view, offset)
        record = JournalRecord()
        record.ParseFromString(cast(bytes, frame.payload))
        records.append(record)
        offset = frame.end
    return records


def marker(phase: str, snapshot_id: str) -> dict[str, str]:
    """The header of a snapshot message (``phase``: begin, part or end)."""
    return {SNAPSHOT_HEADER: f"{phase} {snapshot_id}"}


def _frame(record: JournalRecord) -> bytes:
    return encode_frame(record.SerializeToString())


def outcome_frame(outcome: JournalRecord.Outcome) -> bytes:
    """The frame of an ``outcome`` record (outcomes never change once written)."""
    return _frame(JournalRecord(outcome=outcome))


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When an owner writes a snapshot (``[cluster] snapshot_messages`` / ``_bytes``).

    Due once the subject has grown, since the last snapshot's end, by ``messages``
    messages or ``bytes`` bytes (0 turns that trigger off), *and* by at least the last
    snapshot's own size, so a large state is not rewritten after every few appends: the
    snapshots then take at most half of what the owner writes.
    """

    messages: int
    bytes: int

    @property
    def enabled(self) -> bool:
        return self.messages > 0 or self.bytes > 0

    def due(self, replay: SubjectReplay) -> bool:
        grown = (self.messages > 0 and replay.tail_messages >= self.messages) or (
            self.bytes > 0 and replay.tail_bytes >= self.bytes
        )
        return grown and replay.tail_bytes >= replay.snapshot_bytes


class SnapshotBuilder:
    """The messages of one snapshot of ``state``, each built when asked for.

    Call :meth:`begin` once, then :meth:`next_part` until it returns None (each call
    reads the state as it is *then*: queue the part before the loop runs anything
    else), then :meth:`end`. See the module docstring for why that is consistent.
    """

    def __init__(self, state: JournalState, chunk_bytes: int = CHUNK_BYTES) -> None:
        self._state = state
        self._chunk_bytes = chunk_bytes
        self._operations = list(state.pending)
        self._keys = list(state.key_values)
        self._schedules = list(state.schedules)
        self._window_ids: set[str] = set()
        self._records = self._carry()
        self.carried_operations = 0
        self.carried_keys = 0
        self.bytes = 0

    def _checkpoint(self, dropped_before: int = 0) -> bytes:
        return _frame(
            JournalRecord(
                compaction=JournalRecord.CompactionCheckpoint(
                    dropped_before_index=dropped_before,
                    carried_operations=self.carried_operations,
                    carried_keys=self.carried_keys,
                    written_wall_ms=int(time.time() * 1000),
                    last_sequence=self._state.last_sequence,
                )
            )
        )

    def begin(self, prepared: Mapping[int, bytes] | None = None) -> list[bytes]:
        """The checkpoint and the event window, as one or more message bodies.

        ``prepared``: frames of window outcomes by sequence, serialized beforehand in
        small steps (:func:`outcome_frame`), so the begin only joins them.
        """
        window = self._state.events_window()
        self._window_ids = {outcome.operation_id for outcome in window}
        frames = [self._checkpoint()]
        known = prepared or {}
        frames.extend(known.get(outcome.sequence) or outcome_frame(outcome) for outcome in window)
        bodies: list[bytes] = []
        chunk: list[bytes] = []
        size = 0
        for frame in frames:
            if chunk and size + len(frame) > MAX_MESSAGE_BYTES:
                bodies.append(b"".join(chunk))
                chunk, size = [], 0
            chunk.append(frame)
            size += len(frame)
        bodies.append(b"".join(chunk))
        self.bytes += sum(len(body) for body in bodies)
        return bodies

    def next_part(self) -> bytes | None:
        """The next carried records (about ``chunk_bytes``), or None once all are out."""
        frames: list[bytes] = []
        size = 0
        for record in self._records:
            frame = _frame(record)
            frames.append(frame)
            size += len(frame)
            if size >= self._chunk_bytes:
                break
        if not frames:
            return None
        self.bytes += size
        return b"".join(frames)

    def end(self, begin_sequence: int) -> bytes:
        """The closing checkpoint; ``begin_sequence``: the begin message's stream sequence."""
        body = self._checkpoint(begin_sequence)
        self.bytes += len(body)
        return body

    def _carry(self) -> Iterator[JournalRecord]:
        """Lazily, so each record reflects the state when its part is built."""
        state = self._state
        for op_id in self._operations:
            live = state.pending.get(op_id)
            if live is None:
                continue  # ended since the begin: its outcome follows the begin
            if op_id in self._window_ids:
                yield JournalRecord(registered=live.registration)
            self.carried_operations += 1
            yield JournalRecord(
                carried_operation=JournalRecord.CarriedOperation(
                    registration=live.registration,
                    progress=live.signals,
                    source_index=live.anchor,
                )
            )
        for key in self._keys:
            entry = state.key_values.get(key)
            if entry is None:
                continue
            self.carried_keys += 1
            yield JournalRecord(
                carried_key_value=JournalRecord.CarriedKeyValue(
                    purgatory=state.purgatory, key=key, value=entry[0], source_index=entry[1]
                )
            )
        for schedule_id in self._schedules:
            found = state.schedules.get(schedule_id)
            if found is None:
                continue
            copy = JournalRecord.ScheduleUpserted()
            copy.CopyFrom(found[0])
            copy.carried = True
            copy.source_index = found[1]
            yield JournalRecord(schedule_upserted=copy)
        yield from state.groups.carry(sys.maxsize)


@dataclass(slots=True)
class _Candidate:
    snapshot_id: str
    epoch: str | None
    state: JournalState
    bytes: int


class SubjectReplay:
    """The state a subject's messages imply, snapshots included (see module docstring).

    ``tail_messages`` / ``tail_bytes`` count the ordinary messages since the last
    complete snapshot and ``snapshot_bytes`` is that snapshot's size: what
    :class:`SnapshotPolicy` decides on. An owner keeps using the standby's replay as its
    mirror (:meth:`apply_records` for what it submits).
    """

    def __init__(self, retain_events: int, max_key_values: int, dedup: Dedup = (0, 0)) -> None:
        self._retain_events = retain_events
        self._max_key_values = max_key_values
        # The dedup window (ms, bytes): its outcomes survive a snapshot like the window's.
        self._dedup = dedup
        self.state = JournalState(retain_events, max_key_values, dedup)
        self.next_index = 0
        self.tail_messages = 0
        self.tail_bytes = 0
        self.snapshot_bytes = 0
        self.snapshots = 0  # complete snapshots that replaced the state
        self._candidate: _Candidate | None = None

    @property
    def in_snapshot(self) -> bool:
        return self._candidate is not None

    def drop_candidate(self) -> None:
        """Forget a snapshot under way (its end can no longer come: a new owner took over)."""
        if self._candidate is not None:
            logger.info("snapshot %s was not finished; ignored", self._candidate.snapshot_id)
            self._candidate = None

    def apply(self, data: bytes, headers: Mapping[str, str] | None) -> None:
        """Apply one message of the subject, in stream order (ValueError if damaged)."""
        mark = headers.get(SNAPSHOT_HEADER) if headers else None
        epoch = headers.get(EPOCH_HEADER) if headers else None
        candidate = self._candidate
        if candidate is not None and epoch is not None and epoch != candidate.epoch:
            self.drop_candidate()
            candidate = None
        records = decode_message(data)
        if mark is None:
            self.apply_records(records)
            self.tail_messages += 1
            self.tail_bytes += len(data)
            return
        phase, _, snapshot_id = mark.partition(" ")
        if phase == "begin":
            if candidate is not None:
                self.drop_candidate()
            candidate = _Candidate(
                snapshot_id,
                epoch,
                JournalState(self._retain_events, self._max_key_values, self._dedup),
                0,
            )
            self._candidate = candidate
        elif candidate is None or candidate.snapshot_id != snapshot_id:
            logger.debug("snapshot message %s %s without its begin; ignored", phase, snapshot_id)
            return
        index = self.next_index
        for record in records:
            candidate.state.apply(index, record)
            index += 1
        self.next_index = index
        candidate.bytes += len(data)
        if phase == "end":
            self.state = candidate.state
            self.snapshot_bytes = candidate.bytes
            self.tail_messages = 0
            self.tail_bytes = 0
            self.snapshots += 1
            self._candidate = None

    def apply_records(self, records: Sequence[JournalRecord]) -> None:
        """Apply ordinary records to the state (and to a snapshot under way)."""
        state = self.state
        candidate = self._candidate.state if self._candidate is not None else None
        index = self.next_index
        for record in records:
            state.apply(index, record)
            if candidate is not None:
                candidate.apply(index, record)
            index += 1
        self.next_index = index

    def completed(self, snapshot_bytes: int) -> None:
        """The owner's own snapshot ended: the tail starts again."""
        self.snapshot_bytes = snapshot_bytes
        self.tail_messages = 0
        self.tail_bytes = 0
        self.snapshots += 1
