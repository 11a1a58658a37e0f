"""A schedule on the wire: what a valid ``ScheduleSpec`` is, both ways.

One place knows what a valid schedule is, so UpsertSchedule and journal recovery accept
exactly the same definitions. Pure functions: no thread-safety concerns.
"""

from __future__ import annotations

from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.config.server_config import MAX_TIMEOUT_MS, Limits
from purgatory_server._service.core.progress import make_progress
from purgatory_server._service.model.conditions import ConditionKind, ConditionSpec
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.schedules.definition import OCCURRENCE_SUFFIX, ScheduleDefinition
from purgatory_server._service.schedules.timing import MIN_EVERY_MS, CronError, parse_cron, zone
from purgatory_server._service.wire.convert import condition_from_proto, condition_to_proto
from purgatory_server._service.wire.validation import check_condition, check_keys, check_payload

__all__ = ["definition_from_proto", "definition_to_proto"]


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
    longest = limits.max_operation_id_length - OCCURRENCE_SUFFIX
    if len(schedule_id) > longest:
        raise InvalidArgument(
            "schedule.schedule_id",
            f"{len(schedule_id)} characters exceed {longest} (max_operation_id_length "
            f"{limits.max_operation_id_length} less {OCCURRENCE_SUFFIX} for '@<fire time>')",
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
