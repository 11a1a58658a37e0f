"""A schedule's definition, and the occurrence operations it arms.

One place builds an occurrence from a definition (its deterministic id and its
operation definition), so every producer and every restart builds the same one. What a
valid definition is on the wire is ``wire.schedule_spec``; its journal records are
``durable.schedule_records``. Pure functions and frozen values: no thread-safety concerns.
"""

from __future__ import annotations

from dataclasses import dataclass

from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.quoting import quote
from purgatory_server._service.schedules.timing import next_cron_fire, next_every_fire

__all__ = [
    "OCCURRENCE_SUFFIX",
    "ScheduleDefinition",
    "describe",
    "occurrence_id",
    "parse_occurrence_id",
]

# "@" and up to 20 digits of epoch milliseconds follow the schedule id in occurrence ids.
OCCURRENCE_SUFFIX = 21


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


def describe(definition: ScheduleDefinition) -> str:
    """ "every 60000 ms" / "cron '0 9 * * *' in Europe/Paris", for log lines."""
    if definition.every_ms:
        return f"every {definition.every_ms} ms"
    return f"cron {quote(definition.cron)} in {definition.time_zone or 'UTC'}"
