"""The schedule RPCs' bodies: request -> table call -> response (the servicer delegates).

Kept out of the servicer so the schedule feature stays in its own package; each function
runs on the loop thread, raises :class:`~..errors.ServiceError` (mapped to a status by the
servicer's decorators), and leaves awaiting the journal barrier to the servicer.
"""

from __future__ import annotations

import asyncio

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.errors import InvalidArgument
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.schedules.definition import (
    definition_from_proto,
    definition_to_proto,
)
from purgatory_server._service.schedules.table import ScheduleEntry
from purgatory_server._service.wire.convert import operation_status

__all__ = ["delete_schedule", "list_schedules", "schedule_to_proto", "upsert_schedule"]


def schedule_to_proto(entry: ScheduleEntry) -> pb.Schedule:
    armed = bool(entry.occurrence_id)
    return pb.Schedule(
        spec=definition_to_proto(entry.definition),
        next_operation_id=entry.occurrence_id,
        next_fire_time_ms=entry.fire_time_ms if armed else 0,
        update_time_ms=entry.update_time_ms,
    )


def upsert_schedule(
    purgatory: NamedPurgatory,
    loop: asyncio.AbstractEventLoop,
    request: pb.UpsertScheduleRequest,
    limits: Limits,
) -> pb.UpsertScheduleResponse:
    if not request.HasField("schedule"):
        raise InvalidArgument("schedule", "must be set")
    definition = definition_from_proto(request.schedule, limits)
    entry, created, changed = purgatory.schedule_table().upsert(definition)
    return pb.UpsertScheduleResponse(
        schedule=schedule_to_proto(entry), created=created, changed=changed
    )


def delete_schedule(
    purgatory: NamedPurgatory, loop: asyncio.AbstractEventLoop, request: pb.DeleteScheduleRequest
) -> pb.DeleteScheduleResponse:
    if not request.schedule_id:
        raise InvalidArgument("schedule_id", "must not be empty")
    cancelled = purgatory.schedule_table().delete(request.schedule_id)
    if cancelled is None:
        return pb.DeleteScheduleResponse()
    return pb.DeleteScheduleResponse(cancelled=operation_status(cancelled, False))


def list_schedules(purgatory: NamedPurgatory) -> pb.ListSchedulesResponse:
    table = purgatory.schedules
    entries = [] if table is None else table.entries()
    return pb.ListSchedulesResponse(schedules=[schedule_to_proto(e) for e in entries])
