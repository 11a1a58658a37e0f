"""Column values of the record kinds that are not an operation's own lifecycle.

Worker groups (``group_state``, ``group_delivered``, ``group_settled``, ``group_retry``)
and recurring schedules (``schedule_upserted``, ``schedule_deleted``), plus the condition
columns that a registration and a schedule's template share. Each decoder returns the
values named by ``records.KIND_COLUMNS[kind]``, in that order; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from purgatory_proto.v1 import journal_pb2, purgatory_pb2

_DISPOSITIONS: Final = {
    journal_pb2.JournalRecord.GroupSettled.DISPOSITION_ACKED: "ACKED",
    journal_pb2.JournalRecord.GroupSettled.DISPOSITION_DEAD_LETTERED: "DEAD_LETTERED",
    journal_pb2.JournalRecord.GroupSettled.DISPOSITION_REDRIVEN: "REDRIVEN",
}


def condition_columns(raw: bytes | purgatory_pb2.Condition) -> tuple[str, int | None, bool | None]:
    """``(condition_kind, condition_target, distinct_sources)`` of a service ``Condition``."""
    if isinstance(raw, purgatory_pb2.Condition):
        condition = raw
    else:
        condition = purgatory_pb2.Condition.FromString(raw)
    kind = condition.WhichOneof("kind") or "any_key"
    if kind == "min_signals":
        return kind, condition.min_signals.count, condition.min_signals.distinct_sources
    if kind == "sum_at_least":
        return kind, condition.sum_at_least.threshold, None
    if kind == "values_at_least":
        return kind, condition.values_at_least.default_target, None
    return kind, None, None


def _group_state(gs: Any) -> tuple[Any, ...]:
    return (
        gs.purgatory,
        gs.group,
        gs.visibility_timeout_ms,
        gs.max_attempts,
        gs.last_sequence,
        len(gs.entries),
        gs.source_index,
        gs.deleted,
    )


def _group_delivered(gd: Any) -> tuple[Any, ...]:
    return (gd.purgatory, gd.group, gd.sequence, gd.attempt, gd.lease_deadline_wall_ms)


def _group_retry(gr: Any) -> tuple[Any, ...]:
    return (gr.purgatory, gr.group, gr.sequence, gr.attempt, gr.retry_at_wall_ms)


def _group_settled(gs: Any) -> tuple[Any, ...]:
    disposition = _DISPOSITIONS.get(gs.disposition, "UNSPECIFIED")
    return (gs.purgatory, gs.group, list(gs.sequences), disposition)


def _schedule_upserted(su: Any) -> tuple[Any, ...]:
    spec = purgatory_pb2.ScheduleSpec.FromString(su.definition)
    timing = spec.WhichOneof("timing")
    template = spec.template
    return (
        su.purgatory,
        su.schedule_id,
        spec.every_ms if timing == "every_ms" else None,
        spec.cron if timing == "cron" else None,
        spec.time_zone or None,
        list(template.keys),
        *condition_columns(template.condition),
        su.upserted_wall_ms,
        su.carried,
        su.source_index,
    )


def _schedule_deleted(sd: Any) -> tuple[Any, ...]:
    return (sd.purgatory, sd.schedule_id, sd.deleted_wall_ms)


GROUP_AND_SCHEDULE: Final[dict[str, Callable[[Any], tuple[Any, ...]]]] = {
    "group_state": _group_state,
    "group_delivered": _group_delivered,
    "group_settled": _group_settled,
    "group_retry": _group_retry,
    "schedule_upserted": _schedule_upserted,
    "schedule_deleted": _schedule_deleted,
}
