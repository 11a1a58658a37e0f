"""A schedule's definition: validated from the wire, spelled on the wire and in the journal.

One place knows what a valid schedule is, so UpsertSchedule and journal recovery accept
exactly the same definitions, and one place builds an occurrence operation from it (its
deterministic id and its definition), so every producer and every restart builds the
same one. Pure functions and frozen values: no thread-safety concerns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._service.config.server_config import MAX_TIMEOUT_MS, Limits
from purgatory_server._service.core.conditions import ConditionKind, ConditionSpec, make_progress
from purgatory_server._service.core.errors import InvalidArgument
from purgatory_server._service.core.operation import OperationDefinition
from purgatory_server._service.core.quoting import quote
from purgatory_server._service.durable.codec import condition_to_proto
from purgatory_server._service.schedules.timing import (
    MIN_EVERY_MS,
    CronError,
    next_cron_fire,
    next_every_fire,
    parse_cron,
    zone,
)
from purgatory_server._service.wire.convert import condition_from_proto
from purgatory_server._service.wire.validation import check_condition, check_keys, check_payload

__all__ = [
    "ScheduleDefinition",
    "decode_upserted",
    "definition_from_proto",
    "definition_to_proto",
    "deleted_record",
    "describe",
    "occurrence_id",
    "parse_occurrence_id",
    "upserted_record",
]

# "@" and up to 20 digits of epoch milliseconds follow the schedule id in occurrence ids.
_OCCURRENCE_SUFFIX = 21


@dataclass(frozen=True, slots=True)
class ScheduleDefinition:
    """What UpsertSchedule asked for; equal definitions make a re-send a no-op.

    Exactly one of ``every_ms`` (non-zero) and ``cron`` (non-empty) is set;
    ``time_zone`` only with ``cron`` ("" is UTC).
    """

    schedule_id: str
    every_ms: int
    cron: str
    time_zone: str
    keys: tuple[str, ...]
    condition: ConditionSpec
    payload: bytes

    def next_fire(self, after_ms: int) -> int:
        """The first fire time strictly after ``after_ms`` (epoch ms); CronError if none."""
        if self.every_ms:
            return next_every_fire(self.every_ms, after_ms)
        return next_cron_fire(self.cron, self.time_zone, after_ms, self.schedule_id)

    def occurrence(self, fire_ms: int) -> OperationDefinition:
        """The operation armed for ``fire_ms``: due then, watching the template's keys."""
        return OperationDefinition(self.keys, 0, self.condition, self.payload, fire_ms)


def occurrence_id(schedule_id: str, fire_ms: int) -> str:
    return f"{schedule_id}@{fire_ms}"


def parse_occurrence_id(operation_id: str) -> tuple[str, int] | None:
    """(schedule id, fire time) of an occurrence id, or None if it is not shaped like one."""
    schedule_id, sep, fire = operation_id.rpartition("@")
    if not sep or not schedule_id or not fire.isdigit() or len(fire) > 20:
        return None
    return schedule_id, int(fire)


def _check_template(msg: Any, limits: Limits) -> tuple[tuple[str, ...], ConditionSpec, bytes]:
    keys = check_keys("schedule.template.keys", msg.keys, limits)
    field = "schedule.template.condition"
    condition = condition_from_proto(field, msg.condition)
    check_condition(field, condition, keys, limits)
    if condition.kind is ConditionKind.VALUES_AT_LEAST:
        # Values known before arming count, so an occurrence could end the moment it is
        # armed, and the schedule would race through its future fire times.
        raise InvalidArgument(field, "values_at_least is not allowed in a schedule template")
    progress = make_progress(condition, keys, {}, data_limit=0, sources_limit=0)
    if progress.satisfied():
        raise InvalidArgument(field, "holds before any signal; an occurrence would never wait")
    check_payload("schedule.template.payload", msg.payload, limits)
    return keys, condition, msg.payload


def definition_from_proto(msg: Any, limits: Limits) -> ScheduleDefinition:
    """A ``pb.ScheduleSpec``, validated (InvalidArgument naming the ``schedule.`` field)."""
    schedule_id = msg.schedule_id
    if not schedule_id:
        raise InvalidArgument("schedule.schedule_id", "must not be empty")
    longest = limits.max_operation_id_length - _OCCURRENCE_SUFFIX
    if len(schedule_id) > longest:
        raise InvalidArgument(
            "schedule.schedule_id",
            f"{len(schedule_id)} characters exceed {longest} (max_operation_id_length "
            f"{limits.max_operation_id_length} less {_OCCURRENCE_SUFFIX} for '@<fire time>')",
        )
    timing = msg.WhichOneof("timing")
    every_ms, cron, time_zone = 0, "", msg.time_zone
    if timing == "every_ms":
        every_ms = msg.every_ms
        if not MIN_EVERY_MS <= every_ms <= MAX_TIMEOUT_MS:
            raise InvalidArgument(
                "schedule.every_ms", f"{every_ms} is outside [{MIN_EVERY_MS}, {MAX_TIMEOUT_MS}]"
            )
        if time_zone:
            raise InvalidArgument("schedule.time_zone", "applies to cron only (every_ms is UTC)")
    elif timing == "cron":
        cron = msg.cron.strip()
        try:
            zone(time_zone)
        except CronError as exc:
            raise InvalidArgument("schedule.time_zone", str(exc)) from exc
        try:
            parse_cron(cron, schedule_id)
        except CronError as exc:
            raise InvalidArgument("schedule.cron", str(exc)) from exc
    else:
        raise InvalidArgument("schedule.timing", "set one of every_ms or cron")
    keys, condition, payload = _check_template(msg.template, limits)
    definition = ScheduleDefinition(
        schedule_id, every_ms, cron, time_zone, keys, condition, payload
    )
    if cron:
        try:
            definition.next_fire(0)
        except CronError as exc:
            raise InvalidArgument("schedule.cron", str(exc)) from exc
    return definition


def definition_to_proto(definition: ScheduleDefinition) -> Any:
    template = pb.ScheduleTemplate(
        keys=definition.keys,
        condition=condition_to_proto(definition.condition),
        payload=definition.payload,
    )
    if definition.every_ms:
        return pb.ScheduleSpec(
            schedule_id=definition.schedule_id, every_ms=definition.every_ms, template=template
        )
    return pb.ScheduleSpec(
        schedule_id=definition.schedule_id,
        cron=definition.cron,
        time_zone=definition.time_zone,
        template=template,
    )


def upserted_record(purgatory: str, definition: ScheduleDefinition, now_ms: int) -> JournalRecord:
    return JournalRecord(
        schedule_upserted=JournalRecord.ScheduleUpserted(
            purgatory=purgatory,
            schedule_id=definition.schedule_id,
            definition=definition_to_proto(definition).SerializeToString(),
            upserted_wall_ms=now_ms,
        )
    )


def deleted_record(purgatory: str, schedule_id: str, now_ms: int) -> JournalRecord:
    return JournalRecord(
        schedule_deleted=JournalRecord.ScheduleDeleted(
            purgatory=purgatory, schedule_id=schedule_id, deleted_wall_ms=now_ms
        )
    )


def decode_upserted(
    record: JournalRecord.ScheduleUpserted, limits: Limits
) -> ScheduleDefinition | None:
    """The definition a journaled upsert holds; None (the caller logs) if today's limits
    refuse it (they were lowered since it was written)."""
    try:
        return definition_from_proto(pb.ScheduleSpec.FromString(record.definition), limits)
    except InvalidArgument:
        return None


def describe(definition: ScheduleDefinition) -> str:
    """ "every 60000 ms" / "cron '0 9 * * *' in Europe/Paris", for log lines."""
    if definition.every_ms:
        return f"every {definition.every_ms} ms"
    return f"cron {quote(definition.cron)} in {definition.time_zone or 'UTC'}"
