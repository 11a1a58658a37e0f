"""The schedule RPCs' handlers: request -> the purgatory's schedule table -> response.

Handlers of :func:`.answer.answer`; each runs on the loop thread and raises
:class:`~purgatory_server._service.model.errors.ServiceError`, which the edge maps to a status.
"""

from __future__ import annotations

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import Service
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.schedules.table import ScheduleEntry
from purgatory_server._service.wire.convert import operation_status
from purgatory_server._service.wire.schedule_spec import definition_from_proto, definition_to_proto

__all__ = ["delete_schedule", "list_schedules", "schedule_to_proto", "upsert_schedule"]


def schedule_to_proto(entry: ScheduleEntry) -> pb.Schedule:
    armed = bool(entry.occurrence_id)
    return pb.Schedule(
        spec=definition_to_proto(entry.definition),
        next_operation_id=entry.occurrence_id,
        next_fire_time_ms=entry.fire_time_ms if armed else 0,
        update_time_ms=entry.update_time_ms,
    )


async def upsert_schedule(
    service: Service, purgatory: NamedPurgatory, request: pb.UpsertScheduleRequest
) -> pb.UpsertScheduleResponse:
    if not request.HasField("schedule"):
        raise InvalidArgument("schedule", "must be set")
    definition = definition_from_proto(request.schedule, service.limits)
    entry, created, changed = purgatory.schedule_table().upsert(definition)
    return pb.UpsertScheduleResponse(
        schedule=schedule_to_proto(entry), created=created, changed=changed
    )


async def delete_schedule(
    service: Service, purgatory: NamedPurgatory, request: pb.DeleteScheduleRequest
) -> pb.DeleteScheduleResponse:
    if not request.schedule_id:
        raise InvalidArgument("schedule_id", "must not be empty")
    cancelled = purgatory.schedule_table().delete(request.schedule_id)
    if cancelled is None:
        return pb.DeleteScheduleResponse()
    return pb.DeleteScheduleResponse(cancelled=operation_status(cancelled, False))


async def list_schedules(
    service: Service, purgatory: NamedPurgatory, request: pb.ListSchedulesRequest
) -> pb.ListSchedulesResponse:
    table = purgatory.schedules
    entries = [] if table is None else table.entries()
    return pb.ListSchedulesResponse(schedules=[schedule_to_proto(e) for e in entries])
