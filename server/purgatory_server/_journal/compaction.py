"""Retention and compaction planning: which old segments can go, and what to copy first.

Why a pure planner: the rule for what may be deleted is the journal's main safety
argument, so it is stated once, here, and tested without any I/O. The writer executes a
plan in the crash-safe order (append the carried records, fsync, then delete the old
segments oldest first with a directory fsync after each).

The rule. Only a *prefix* of the sealed segments (oldest first, never the head) is ever
deleted, so the surviving segments always hold a contiguous index range. With ``cutoff``
the index just past the prefix, deleting it loses nothing recovery needs once these are
appended to the head:

- every pending operation whose anchor (registration or latest carry) is below ``cutoff``,
  as a ``CarriedOperation`` with its definition and all its progress so far;
- every key whose latest value was set below ``cutoff``, as a ``CarriedKeyValue``;
- every schedule whose latest upsert lies below ``cutoff``, as a copy of that
  ``ScheduleUpserted`` marked ``carried`` (replaying an upsert replaces, so it is
  idempotent too);
- every worker group whose latest ``group_state`` is below ``cutoff``, as a new
  ``group_state`` with the outcomes it still holds (:mod:`.groups`);
- the highest outcome sequence, in the ``CompactionCheckpoint`` that ends the carry;

and provided no outcome still in the event window lies below ``cutoff`` (the window pins
its segments). Signals below ``cutoff`` matter only through the two carries above;
outcomes below it are out of the window. A crash after the append but before the last
deletion leaves both copies; replay is the same either way because carries replace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.segments import SegmentMeta
from purgatory_server._journal.state import JournalState
from purgatory_server._journal.wire import carried_operation_payload


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Delete ``doomed`` after appending ``records`` (serialized ``JournalRecord``s: a
    carried operation's registration and progress are the journaled bytes, verbatim);
    ``freed_bytes`` is the doomed segments' total size."""

    doomed: tuple[SegmentMeta, ...]
    cutoff: int
    records: tuple[bytes, ...]
    carried_operations: int
    carried_keys: int
    freed_bytes: int


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction did (all zero if there was nothing to do or it was not worth it)."""

    deleted_segments: int = 0
    freed_bytes: int = 0
    carried_operations: int = 0
    carried_keys: int = 0
    carried_bytes: int = 0
    skipped_reason: str = ""


def deletable_prefix(segments: list[SegmentMeta], state: JournalState) -> list[SegmentMeta]:
    """The oldest sealed segments that hold no outcome still in the event window."""
    if len(segments) < 2:
        return []
    boundary = segments[-1].base  # never the head
    earliest_event = state.earliest_event_index()
    if earliest_event is not None:
        boundary = min(boundary, earliest_event)
    prefix = []
    for seg in segments[:-1]:
        if seg.end_index > boundary:
            break
        prefix.append(seg)
    return prefix


def plan_compaction(segments: list[SegmentMeta], state: JournalState) -> CompactionPlan | None:
    """The plan that deletes the longest deletable prefix, or None if there is none."""
    doomed = deletable_prefix(segments, state)
    if not doomed:
        return None
    cutoff = doomed[-1].end_index
    records: list[bytes] = [
        carried_operation_payload(live.raw, live.raw_signals or [], live.anchor)
        for live in state.pending.values()
        if live.anchor < cutoff
    ]
    carried_ops = len(records)
    others: list[JournalRecord] = []
    for key, (value, anchor) in state.key_values.items():
        if anchor < cutoff:
            others.append(
                JournalRecord(
                    carried_key_value=JournalRecord.CarriedKeyValue(
                        purgatory=state.purgatory, key=key, value=value, source_index=anchor
                    )
                )
            )
    carried_keys = len(others)
    for upserted, anchor in state.schedules.values():
        if anchor < cutoff:
            copy = JournalRecord.ScheduleUpserted()
            copy.CopyFrom(upserted)
            copy.carried = True
            copy.source_index = anchor
            others.append(JournalRecord(schedule_upserted=copy))
    others.extend(state.groups.carry(cutoff))
    others.append(
        JournalRecord(
            compaction=JournalRecord.CompactionCheckpoint(
                dropped_before_index=cutoff,
                carried_operations=carried_ops,
                carried_keys=carried_keys,
                written_wall_ms=int(time.time() * 1000),
                last_sequence=state.last_sequence,
            )
        )
    )
    records.extend(record.SerializeToString() for record in others)
    return CompactionPlan(
        doomed=tuple(doomed),
        cutoff=cutoff,
        records=tuple(records),
        carried_operations=carried_ops,
        carried_keys=carried_keys,
        freed_bytes=sum(seg.size for seg in doomed),
    )
