"""Recurring schedules on the client side: the :class:`Schedule` model and the no-I/O
request building and response parsing the sync and async clients share.

A schedule fires every ``every_ms`` (on the epoch grid) or at the times a five-field
``cron`` expression names in ``time_zone``; each firing is an operation with the id
``"<schedule_id>@<fire time ms>"`` (docs/service.md "Recurring schedules").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._checks import converting, key_list, text, uint
from purgatory_client._models import Condition, ConditionKind
from purgatory_client._requests import condition_to_proto
from purgatory_client.errors import invalid_argument

__all__ = [
    "Schedule",
    "ScheduleUpsert",
    "delete_schedule_request",
    "list_schedules_request",
    "schedule_from_proto",
    "upsert_schedule_request",
]


@dataclass(frozen=True)
class Schedule:
    """A schedule as the server keeps it, with its armed occurrence.

    ``next_operation_id`` is ``"<schedule_id>@<next_fire_time_ms>"`` (empty, and the time
    0, while none is armed). Exactly one of ``every_ms`` (non-zero) and ``cron`` is set.
    """

    schedule_id: str
    every_ms: int
    cron: str
    time_zone: str
    keys: tuple[str, ...]
    condition: Condition
    payload: bytes
    next_operation_id: str
    next_fire_time_ms: int
    update_time_ms: int


@dataclass(frozen=True)
class ScheduleUpsert:
    """What ``upsert_schedule`` returns: the schedule, whether its id was new, and whether
    anything changed (False for a re-send of the same definition)."""

    schedule: Schedule
    created: bool
    changed: bool


def upsert_schedule_request(
    purgatory: str,
    schedule_id: str,
    *,
    every_ms: int | None,
    cron: str | None,
    time_zone: str,
    keys: Iterable[str],
    condition: Condition | None,
    payload: bytes,
) -> Any:
    if (every_ms is None) == (cron is None):
        raise invalid_argument("timing", "give exactly one of every_ms or cron")
    with converting("schedule"):
        spec = pb.ScheduleSpec(
            schedule_id=text("schedule_id", schedule_id),
            time_zone=text("time_zone", time_zone),
            template=pb.ScheduleTemplate(
                keys=key_list("keys", keys),
                condition=condition_to_proto(condition),
                payload=payload,
            ),
        )
        if every_ms is not None:
            spec.every_ms = uint("every_ms", every_ms)
        else:
            spec.cron = text("cron", cron)
        return pb.UpsertScheduleRequest(purgatory=text("purgatory", purgatory), schedule=spec)


def delete_schedule_request(purgatory: str, schedule_id: str) -> Any:
    return pb.DeleteScheduleRequest(
        purgatory=text("purgatory", purgatory), schedule_id=text("schedule_id", schedule_id)
    )


def list_schedules_request(purgatory: str) -> Any:
    return pb.ListSchedulesRequest(purgatory=text("purgatory", purgatory))


def _condition(msg: Any) -> Condition:
    kind = msg.WhichOneof("kind")
    if kind == "all_keys":
        return Condition.all_keys()
    if kind == "min_signals":
        m = msg.min_signals
        return Condition.min_signals(m.count, distinct_sources=m.distinct_sources)
    if kind == "sum_at_least":
        return Condition.sum_at_least(msg.sum_at_least.threshold)
    if kind == "values_at_least":
        v = msg.values_at_least
        return Condition(
            ConditionKind.VALUES_AT_LEAST,
            targets=MappingProxyType(dict(v.targets)),
            default_target=v.default_target,
        )
    return Condition.any_key()


def schedule_from_proto(msg: Any) -> Schedule:
    spec = msg.spec
    template = spec.template
    timing = spec.WhichOneof("timing")
    return Schedule(
        schedule_id=spec.schedule_id,
        every_ms=spec.every_ms if timing == "every_ms" else 0,
        cron=spec.cron if timing == "cron" else "",
        time_zone=spec.time_zone,
        keys=tuple(template.keys),
        condition=_condition(template.condition),
        payload=template.payload,
        next_operation_id=msg.next_operation_id,
        next_fire_time_ms=msg.next_fire_time_ms,
        update_time_ms=msg.update_time_ms,
    )
