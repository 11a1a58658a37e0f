"""A schedule's journal records: upserted (with its definition) and deleted."""

from __future__ import annotations

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.schedules.definition import ScheduleDefinition
from purgatory_server._service.wire.schedule_spec import definition_from_proto, definition_to_proto

__all__ = ["decode_upserted", "deleted_record", "upserted_record"]


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
