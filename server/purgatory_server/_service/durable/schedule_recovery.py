"""Bringing a durable purgatory's schedules back at start-up (called by :mod:`.local_store`).

Two steps around the restore of the pending operations: the journaled definitions go in
first, so that an occurrence which fell due during the downtime (and ends as soon as it
is re-armed) finds its schedule; after the operations, each schedule adopts its
recovered occurrence or arms a new one (:meth:`ScheduleTable.resume`).

Thread safety: the loop thread, at start-up, before the purgatory serves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.durable.schedule_records import decode_upserted

__all__ = ["restore_schedules", "resume_schedules"]

logger = logging.getLogger("purgatory_server.service")


def restore_schedules(
    purgatory: NamedPurgatory, records: Iterable[JournalRecord.ScheduleUpserted]
) -> None:
    """Put the journaled schedule definitions back (no occurrence armed yet)."""
    table = None
    for record in records:
        table = table or purgatory.schedule_table()
        definition = decode_upserted(record, purgatory.limits)
        if definition is None:
            logger.error(
                "purgatory %s: journaled schedule %r is refused by the current limits; dropped",
                purgatory.name,
                record.schedule_id[:100],
            )
            continue
        table.restore(definition, record.upserted_wall_ms)


def resume_schedules(purgatory: NamedPurgatory, pending_ids: Iterable[str]) -> None:
    """Adopt recovered occurrences and arm the missing ones (after restoring operations)."""
    table = purgatory.schedules
    if table is not None and len(table):
        table.resume(pending_ids)
        logger.info("purgatory %s: %d schedules resumed", purgatory.name, len(table))
