"""Retention and compaction planning: which old segments can go, and what to copy first.

The deletion rule is the journal's main safety argument, so it is stated once, here, and
planned without I/O (:func:`plan_compaction`). :func:`run_compaction` executes a plan on
the writer thread in the crash-safe order: append the carried records, fsync, record the
cutoff as the journal's start (``START``, read by recovery's contiguity check), then
delete the old segments oldest first with a directory fsync after each.

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

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.framing import encode_frame
from purgatory_server._journal.segment_writer import NO_SPACE_ERRNOS, SegmentWriter
from purgatory_server._journal.segments import SegmentMeta
from purgatory_server._journal.state import JournalState
from purgatory_server._journal.wire import carried_operation_payload

log = logging.getLogger(__name__)


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


def run_compaction(
    files: SegmentWriter,
    state: JournalState,
    *,
    force: bool,
    max_carry_ratio: float,
    hook: Callable[[str], None],
) -> CompactionResult:
    """Plan and execute one compaction (writer thread only).

    Skipped, with the reason, when nothing is deletable, when a carried operation is too
    large for a record, or (unless ``force``) when the carry would cost more than
    ``max_carry_ratio`` of the bytes it frees. ``hook`` is a test hook at named points.
    """
    plan = plan_compaction(files.segments, state)
    if plan is None:
        return CompactionResult(skipped_reason="no deletable segment")
    try:
        frames = [encode_frame(payload) for payload in plan.records]
    except ValueError as exc:  # a carried operation larger than a record may be
        log.warning("journal compaction skipped: %s", exc)
        return CompactionResult(skipped_reason=str(exc))
    carried_bytes = sum(len(f) for f in frames)
    limit = max_carry_ratio * plan.freed_bytes
    if not force and carried_bytes > limit:
        return CompactionResult(
            carried_bytes=carried_bytes,
            skipped_reason=f"carry {carried_bytes} B > {limit:.0f} B allowed",
        )
    for frame in frames:
        files.add_frame(None, frame)
    files.write_pending()  # out of space: nothing deleted, the carry written later
    files.fsync_head()
    files.sealed = False  # rolls caused by the carry need no new pass
    hook("compaction:carried")
    try:
        files.record_start(plan.cutoff)
    except OSError as exc:
        if exc.errno not in NO_SPACE_ERRNOS:
            raise
        log.warning("journal compaction in %s skipped: no START: %s", files.directory, exc)
        return CompactionResult(carried_bytes=carried_bytes, skipped_reason=str(exc))
    for seg in plan.doomed:
        files.delete(seg)
        hook(f"compaction:deleted:{seg.path.name}")
    state.forget_ended_before(plan.cutoff)
    log.info(
        "journal compaction in %s: deleted %d segments (%d B), carried %d ops, %d keys",
        files.directory,
        len(plan.doomed),
        plan.freed_bytes,
        plan.carried_operations,
        plan.carried_keys,
    )
    return CompactionResult(
        deleted_segments=len(plan.doomed),
        freed_bytes=plan.freed_bytes,
        carried_operations=plan.carried_operations,
        carried_keys=plan.carried_keys,
        carried_bytes=carried_bytes,
    )
