"""The recovery state builder: what a record stream says the purgatory's state is.

Free of I/O, so recovery, compaction and tests share it and the writer keeps it up to date
as it appends (compaction reads it to know what to carry forward).

Replay rules (the contract docs/journal.md states for outside readers too):

- ``registered``: a new pending operation with no progress. A second registration of an
  id that is already pending is ignored (logged); an id that had ended may start again.
- ``signal``: if it carries ``value``, it becomes the key's latest value. It is appended
  to the progress of every pending operation watching its key (each operation once, even
  if it lists the key twice). Progress is the raw list of applied signals, in journal
  order; the server folds it with the operation's condition.
- ``outcome``: the operation is no longer pending and is *ended*; the outcome joins the
  event window. A second outcome for an ended id is ignored (logged): an operation has at
  most one outcome.
- ``carried_operation``: *replaces* the operation's definition and progress (creates it
  if absent). That is what makes compaction's copies idempotent. Ignored for an ended id.
- ``carried_key_value``: sets the key's latest value.
- ``rescheduled``: the pending operation's registration takes the new ``due_wall_ms``
  (re-encoded, so a compaction copy carries it). Ignored for an id not pending.
- ``schedule_upserted``: *replaces* the schedule's definition (creates it if absent), so
  compaction's copies are idempotent; ``schedule_deleted`` forgets it (unknown ids are
  ignored). A schedule's occurrences are ordinary operations.
- ``compaction``: ``last_sequence`` becomes at least its ``last_sequence`` (outcome records
  may all have been deleted); otherwise informational.

The event window holds outcomes with ``sequence > last_sequence - retain_events``, in
journal order. The server appends outcomes in increasing sequence order.

The dedup window (:mod:`.dedup_window`, by time and bytes) pins its segments likewise.

A pending operation's registration and progress are kept as their journaled bytes, never
as parsed messages; compaction writes them back verbatim. A key's watchers are a list
swept lazily (:class:`.pending.Watching`).

Thread-safety: none. One thread owns a :class:`JournalState` (the writer thread, or the
opener before the writer starts); :class:`RecoveredState` snapshots are immutable, except
that a ``lazy`` snapshot's pending operations (:class:`PendingView`) reflect the state
only until the next record is applied.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.dedup_window import Dedup, DedupWindow
from purgatory_server._journal.groups import GroupTracker, RecoveredGroup
from purgatory_server._journal.pending import (
    DEAD,
    LiveOperation,
    PendingOperation,
    PendingView,
    Watching,
)
from purgatory_server._journal.wire import sole_field, split_carried

log = logging.getLogger(__name__)

Registered = JournalRecord.OperationRegistered
Signal = JournalRecord.SignalApplied
Outcome = JournalRecord.Outcome
ScheduleUpserted = JournalRecord.ScheduleUpserted

# JournalRecord's oneof field numbers that apply_raw reads without a full parse.
_REGISTERED = 1
_SIGNAL = 2
_CARRIED = 4


@dataclass(frozen=True, slots=True)
class RecoveredState:
    """Everything the server needs to resume a durable purgatory.

    - ``pending``: operation id -> definition and progress.
    - ``key_values``: key -> its latest value (only keys that ever had one).
    - ``last_sequence``: highest outcome sequence seen (0 if none); the next is +1.
    - ``events``: the retained outcome window, in journal (= sequence) order.
    - ``ended``: ids with an outcome still in the journal (older ones were compacted away).
    - ``finished``: the event and dedup windows' outcomes, in order (finished ids).
    - ``next_index``: the journal index the next appended record will get.
    - ``schedules``: schedule id -> its latest upsert record (deleted ones left out).
    - ``groups``: worker group name -> its settings, cursor and entries (see
      :mod:`.groups`).
    """

    pending: Mapping[str, PendingOperation]
    key_values: Mapping[str, int]
    last_sequence: int
    events: tuple[Outcome, ...]
    ended: frozenset[str]
    next_index: int
    schedules: Mapping[str, ScheduleUpserted] = field(default_factory=dict)
    groups: Mapping[str, RecoveredGroup] = dataclasses.field(default_factory=dict)
    finished: tuple[Outcome, ...] = ()


class JournalState:
    """Applies records in journal order and maintains the state they imply."""

    def __init__(self, retain_events: int, max_key_values: int = 100_000, dedup: Dedup = (0, 0)):
        self.retain_events = retain_events
        self._dedup = DedupWindow(*dedup)  # (window ms, max bytes); 0: none
        self.max_key_values = max_key_values
        self.pending: dict[str, LiveOperation] = {}
        # key -> (latest value, index of the record that set it), least recently set
        # first; bounded by max_key_values (see _set_value).
        self.key_values: dict[str, tuple[int, int]] = {}
        self.last_sequence = 0
        self.purgatory = ""  # from the latest value-setting record; compaction copies it
        self.records_applied = 0
        # key -> the pending operations watching it (see Watching).
        self._watchers: dict[str, Watching] = {}
        self._events: deque[tuple[int, Outcome]] = deque()
        self._ended: dict[str, int] = {}
        self._ended_order: deque[tuple[int, str]] = deque()
        # schedule id -> (latest upsert record, its journal index: the anchor compaction
        # must carry forward before deleting its segment).
        self.schedules: dict[str, tuple[ScheduleUpserted, int]] = {}
        self.groups = GroupTracker()
        # Pending id -> due time, only between track_due_times() and snapshot(): what a
        # start-up snapshot hands the server without parsing every registration again.
        self._due_times: dict[str, int] | None = None

    # -- applying -----------------------------------------------------------------------

    def apply(self, index: int, record: JournalRecord) -> None:
        """Apply the record at journal ``index``; indices must increase across calls."""
        self._apply(index, record)

    def apply_raw(
        self, index: int, payload: bytes | memoryview, record: JournalRecord | None = None
    ) -> None:
        """Apply the serialized record ``payload`` at journal ``index`` (as :meth:`apply`).

        ``record``, if given, is ``payload`` parsed. Raises
        ``google.protobuf.message.DecodeError`` for bytes that do not parse (nothing
        applied then).
        """
        sole = sole_field(payload)
        if sole is not None:
            case, start = sole
            if case == _REGISTERED:
                raw = bytes(payload[start:])
                reg = record.registered if record is not None else Registered.FromString(raw)
                self.records_applied += 1
                self._register(index, reg.operation_id, raw, reg.keys, reg.due_wall_ms)
                return
            if case == _SIGNAL:
                raw = bytes(payload[start:])
                sig = record.signal if record is not None else Signal.FromString(raw)
                self.records_applied += 1
                self._signal(index, sig, raw)
                return
            if case == _CARRIED:
                parts = split_carried(payload[start:])
                if parts is not None:
                    raw, progress = parts
                    reg = Registered.FromString(raw)
                    self.records_applied += 1
                    self._carried(index, reg, raw, progress)
                    return
        if record is None:
            # upb parses straight from the buffer; the stub only says bytes.
            record = JournalRecord.FromString(cast(bytes, payload))
        self._apply(index, record)

    def _apply(self, index: int, record: JournalRecord) -> None:
        self.records_applied += 1
        kind = record.WhichOneof("record")
        if kind == "registered":
            reg = record.registered
            raw = reg.SerializeToString()
            self._register(index, reg.operation_id, raw, reg.keys, reg.due_wall_ms)
        elif kind == "signal":
            self._signal(index, record.signal, record.signal.SerializeToString())
        elif kind == "outcome":
            self._outcome(index, record.outcome)
        elif kind == "carried_operation":
            carried = record.carried_operation
            self._carried(
                index,
                carried.registration,
                carried.registration.SerializeToString(),
                [s.SerializeToString() for s in carried.progress],
            )
        elif kind == "rescheduled":
            self._rescheduled(record.rescheduled)
        else:
            self._apply_other(index, kind, record)

    def _apply_other(self, index: int, kind: str | None, record: JournalRecord) -> None:
        """The records that are not about one operation: key values, compaction
        checkpoints, schedules and worker groups."""
        if kind == "carried_key_value":
            kv = record.carried_key_value
            self._set_value(kv.key, kv.value, index)
            self.purgatory = kv.purgatory
        elif kind == "compaction":
            self.last_sequence = max(self.last_sequence, record.compaction.last_sequence)
        elif kind == "schedule_upserted":
            upserted = record.schedule_upserted
            self.schedules[upserted.schedule_id] = (upserted, index)
        elif kind == "schedule_deleted":
            self.schedules.pop(record.schedule_deleted.schedule_id, None)
        elif kind == "group_state":
            self.groups.apply_state(index, record.group_state)
        elif kind == "group_delivered":
            self.groups.apply_delivered(record.group_delivered)
        elif kind == "group_settled":
            self.groups.apply_settled(record.group_settled)
        elif kind == "group_retry":
            self.groups.apply_retry(record.group_retry)
        else:
            log.warning("journal record %d has no record kind known to this reader", index)

    def _watch(self, live: LiveOperation, keys: Sequence[str]) -> tuple[str, ...]:
        """Add ``live`` to its keys' watchers; return its keys as shared objects (one
        ``str``, and for a single key one tuple, per key rather than per operation)."""
        watchers = self._watchers
        if len(keys) == 1:
            watching = watchers.get(keys[0])
            if watching is None:
                watching = watchers[keys[0]] = Watching(keys[0])
            watching.add(live)
            return watching.single
        kept = []
        for key in dict.fromkeys(keys):  # each distinct key once, in order
            watching = watchers.get(key)
            if watching is None:
                watching = watchers[key] = Watching(key)
            watching.add(live)
            kept.append(watching.single[0])
        return tuple(kept)

    def _unwatch(self, live: LiveOperation) -> None:
        """``live`` ended or was replaced: mark it dead and leave its keys' watchers."""
        live.anchor = DEAD
        watchers = self._watchers
        for key in live.keys:
            watching = watchers[key]
            if watching.remove() == 0:
                del watchers[key]

    def _set_value(self, key: str, value: int, index: int) -> None:
        """Record ``key``'s latest value, keeping at most ``max_key_values`` keys.

        Mirrors the server's LatestValues: least recently set first, except that watched
        keys (a VALUES_AT_LEAST operation needs them) move to the recent end. Each key is
        looked at once, so this ends even if every key is watched.
        """
        values = self.key_values
        values.pop(key, None)
        values[key] = (value, index)
        if len(values) <= self.max_key_values:
            return
        watchers = self._watchers
        for _ in range(len(values)):
            if len(values) <= self.max_key_values:
                return
            oldest = next(iter(values))
            kept = values.pop(oldest)
            if oldest in watchers:
                values[oldest] = kept

    def _register(
        self, index: int, op_id: str, raw: bytes, keys: Sequence[str], due_wall_ms: int
    ) -> None:
        if op_id in self.pending:
            log.warning("journal record %d registers %r again; ignored", index, op_id)
            return
        if self._ended:
            self._ended.pop(op_id, None)
        live = self.pending[op_id] = LiveOperation(raw, (), None, index)
        live.keys = self._watch(live, keys)
        if self._due_times is not None:
            self._due_times[op_id] = due_wall_ms

    def _signal(self, index: int, sig: Signal, raw: bytes) -> None:
        if sig.HasField("value"):
            self._set_value(sig.key, sig.value, index)
            self.purgatory = sig.purgatory
        watching = self._watchers.get(sig.key)
        if watching is not None:
            for live in watching.ops:
                if live.anchor == DEAD:
                    continue
                if live.raw_signals is None:
                    live.raw_signals = [raw]
                else:
                    live.raw_signals.append(raw)

    def _outcome(self, index: int, outcome: Outcome) -> None:
        op_id = outcome.operation_id
        if op_id in self._ended:
            log.warning("journal record %d is a second outcome for %r; ignored", index, op_id)
            return
        live = self.pending.pop(op_id, None)
        if live is not None:
            self._unwatch(live)
            if self._due_times is not None:
                self._due_times.pop(op_id, None)
        self._ended[op_id] = index
        self._ended_order.append((index, op_id))
        self.last_sequence = max(self.last_sequence, outcome.sequence)
        self._events.append((index, outcome))
        if self.groups.groups:
            self.groups.apply_outcome(outcome)
        floor = self.last_sequence - self.retain_events
        while self._events and self._events[0][1].sequence <= floor:
            self._events.popleft()
        self._dedup.add(index, outcome)

    def _carried(self, index: int, reg: Registered, raw: bytes, progress: list[bytes]) -> None:
        op_id = reg.operation_id
        if op_id in self._ended:
            log.warning("journal record %d carries ended operation %r; ignored", index, op_id)
            return
        old = self.pending.get(op_id)
        if old is not None:
            self._unwatch(old)
        live = self.pending[op_id] = LiveOperation(raw, (), progress or None, index)
        live.keys = self._watch(live, reg.keys)
        if self._due_times is not None:
            self._due_times[op_id] = reg.due_wall_ms

    def _rescheduled(self, moved: JournalRecord.OperationRescheduled) -> None:
        """The registration takes the new due time (re-encoded, so a compaction copy
        carries it)."""
        live = self.pending.get(moved.operation_id)
        if live is None:
            return
        reg = Registered.FromString(live.raw)
        reg.due_wall_ms = moved.due_wall_ms
        live.raw = reg.SerializeToString()
        if self._due_times is not None:
            self._due_times[moved.operation_id] = moved.due_wall_ms

    def track_due_times(self) -> None:
        """Keep each pending operation's due time beside it until the next :meth:`snapshot`
        (a journal opening: its snapshot then needs no parse per operation)."""
        pending = self.pending
        self._due_times = {op_id: live.registration.due_wall_ms for op_id, live in pending.items()}

    # -- reading ------------------------------------------------------------------------

    def events_window(self) -> list[Outcome]:
        """What a snapshot carries of the outcomes (:meth:`.DedupWindow.carry`)."""
        return self._dedup.carry(self._events, self.pending)

    def earliest_event_index(self) -> int | None:
        """Journal index of the oldest outcome in the event or dedup window (pins its segment)."""
        return self._dedup.pin(self._events[0][0] if self._events else None)

    def forget_ended_before(self, cutoff: int) -> None:
        """Drop ended ids whose outcome record (index < ``cutoff``) was deleted."""
        while self._ended_order and self._ended_order[0][0] < cutoff:
            index, op_id = self._ended_order.popleft()
            if self._ended.get(op_id) == index:
                del self._ended[op_id]

    def snapshot(self, next_index: int, *, lazy: bool = False) -> RecoveredState:
        """An immutable copy for the server (O(pending + keys + ended)).

        ``lazy``: the pending operations are a :class:`PendingView`, valid only until the
        next record is applied (a journal's opening snapshot). Ends
        :meth:`track_due_times` (its table goes into this snapshot).
        """
        dues, self._due_times = self._due_times, None
        if dues is None:
            pending = self.pending
            dues = {op_id: live.registration.due_wall_ms for op_id, live in pending.items()}
        ops: Mapping[str, PendingOperation]
        if lazy:
            ops = PendingView(dict(self.pending), dues)
        else:
            ops = dict(PendingView(self.pending, dues).items())
        return RecoveredState(
            pending=ops,
            key_values={key: value for key, (value, _) in self.key_values.items()},
            last_sequence=self.last_sequence,
            events=tuple(outcome for _, outcome in self._events),
            ended=frozenset(self._ended),
            next_index=next_index,
            schedules={sid: upserted for sid, (upserted, _) in self.schedules.items()},
            groups=self.groups.snapshot(),
            finished=self._dedup.merge(self._events),
        )
