"""Journal records as columns: the one schema of ``spark.read.format("purgatory-journal")``.

Why columns built per batch and not rows: the Python Data Source hands Spark Arrow record
batches straight through (no per-row pickling, no row-at-a-time UDF), so a segment is
decoded into Python lists of a few thousand values per column and turned into one
``pyarrow.RecordBatch``. The protobuf parse itself is upb's C code.

One row per journal record (and one ``torn_tail`` row per skipped tail, so the count of what
the torn-tail rule dropped travels with the data). Columns that do not apply to a record's
kind are null. See docs/pipeline.md for the column list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError
from purgatory_proto.v1 import journal_pb2, purgatory_pb2

from purgatory_pipeline.record_decoders import GROUP_AND_SCHEDULE, condition_columns
from purgatory_pipeline.segment import SegmentReader

BATCH_ROWS: Final = 8192

KINDS: Final = (
    "registered",
    "signal",
    "outcome",
    "carried_operation",
    "carried_key_value",
    "compaction",
    "rescheduled",
    "group_state",
    "group_delivered",
    "group_settled",
    "group_retry",
    "schedule_upserted",
    "schedule_deleted",
    "unknown",
    "torn_tail",
)

_STATES: Final = {
    journal_pb2.JournalRecord.Outcome.STATE_COMPLETED: "COMPLETED",
    journal_pb2.JournalRecord.Outcome.STATE_EXPIRED: "EXPIRED",
    journal_pb2.JournalRecord.Outcome.STATE_FORCE_COMPLETED: "FORCE_COMPLETED",
    journal_pb2.JournalRecord.Outcome.STATE_CANCELLED: "CANCELLED",
}

_STR, _LONG, _BOOL = pa.string(), pa.int64(), pa.bool_()
_STRS = pa.list_(pa.string())
_LONGS = pa.list_(pa.int64())


SCHEMA: Final = pa.schema(
    [
        ("journal", _STR),  # the journal directory (or file) the record came from
        ("segment", _STR),  # segment file name
        ("index", _LONG),  # journal index (unique per journal)
        ("byte_offset", _LONG),  # offset of the frame in the segment
        ("kind", _STR),
        ("purgatory", _STR),
        ("operation_id", _STR),
        ("keys", _STRS),
        ("timeout_ms", _LONG),
        ("condition_kind", _STR),  # any_key, all_keys, min_signals, sum_at_least, values_at_least
        ("condition_target", _LONG),  # min_signals count / sum threshold / default target
        ("distinct_sources", _BOOL),
        ("created_wall_ms", _LONG),
        ("due_wall_ms", _LONG),
        ("key", _STR),
        ("amount", _LONG),
        ("value", _LONG),
        ("source", _STR),
        ("applied_wall_ms", _LONG),
        ("state", _STR),
        ("sequence", _LONG),
        ("completed_wall_ms", _LONG),
        ("lateness_ms", _LONG),
        ("signal_count", _LONG),
        ("sources", _STRS),
        ("amount_sum", _LONG),
        ("carried_signals", _LONG),
        ("source_index", _LONG),
        ("torn_bytes", _LONG),
        ("extend_on_resend", _BOOL),  # registered, carried_operation: debounce policy
        ("max_extend_ms", _LONG),
        ("group_name", _STR),  # group_state, group_delivered, group_settled, group_retry
        ("visibility_timeout_ms", _LONG),  # group_state
        ("max_attempts", _LONG),  # group_state
        ("group_entries", _LONG),  # group_state: outcomes it holds (carried state)
        ("deleted", _BOOL),  # group_state
        ("attempt", _LONG),  # group_delivered, group_retry
        ("sequences", _LONGS),  # group_settled
        ("disposition", _STR),  # group_settled: ACKED, DEAD_LETTERED, REDRIVEN
        ("schedule_id", _STR),  # schedule_upserted, schedule_deleted
        ("every_ms", _LONG),  # schedule_upserted: fixed interval
        ("cron", _STR),  # schedule_upserted: cron expression
        ("time_zone", _STR),  # schedule_upserted
        ("carried", _BOOL),  # schedule_upserted: compaction's copy
    ]
)
COLUMNS: Final = tuple(SCHEMA.names)

_SPARK_TYPES: Final = {"string": "STRING", "int64": "BIGINT", "bool": "BOOLEAN"}


def spark_ddl() -> str:
    """The schema as a Spark DDL string (the data source's ``schema()``)."""
    parts = []
    for field in SCHEMA:
        if pa.types.is_list(field.type):
            item = _SPARK_TYPES[str(field.type.value_type)]
            parts.append(f"{field.name} ARRAY<{item}>")
        else:
            parts.append(f"{field.name} {_SPARK_TYPES[str(field.type)]}")
    return ", ".join(parts)


# Each kind fills a fixed set of columns, in this order, after (index, byte_offset). Rows of
# one kind are gathered as tuples and transposed into columns once per batch (zip is C
# code), which is what keeps decoding near the cost of the protobuf parse itself.
_REGISTRATION_COLUMNS: Final = (
    "purgatory",
    "operation_id",
    "keys",
    "timeout_ms",
    "created_wall_ms",
    "due_wall_ms",
    "condition_kind",
    "condition_target",
    "distinct_sources",
    "extend_on_resend",
    "max_extend_ms",
)
KIND_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    "registered": _REGISTRATION_COLUMNS,
    "signal": ("purgatory", "key", "amount", "value", "source", "applied_wall_ms"),
    "outcome": (
        "purgatory",
        "operation_id",
        "state",
        "sequence",
        "completed_wall_ms",
        "lateness_ms",
        "keys",
        "created_wall_ms",
        "due_wall_ms",
        "timeout_ms",
        "signal_count",
        "sources",
        "amount_sum",
        "condition_kind",
        "condition_target",
        "distinct_sources",
    ),
    "carried_operation": (*_REGISTRATION_COLUMNS, "carried_signals", "source_index"),
    "carried_key_value": ("purgatory", "key", "value", "source_index"),
    "compaction": ("sequence", "applied_wall_ms", "source_index"),
    "rescheduled": ("purgatory", "operation_id", "due_wall_ms"),
    "group_state": (
        "purgatory",
        "group_name",
        "visibility_timeout_ms",
        "max_attempts",
        "sequence",
        "group_entries",
        "source_index",
        "deleted",
    ),
    "group_delivered": ("purgatory", "group_name", "sequence", "attempt", "due_wall_ms"),
    "group_settled": ("purgatory", "group_name", "sequences", "disposition"),
    "group_retry": ("purgatory", "group_name", "sequence", "attempt", "due_wall_ms"),
    "schedule_upserted": (
        "purgatory",
        "schedule_id",
        "every_ms",
        "cron",
        "time_zone",
        "keys",
        "condition_kind",
        "condition_target",
        "distinct_sources",
        "applied_wall_ms",
        "carried",
        "source_index",
    ),
    "schedule_deleted": ("purgatory", "schedule_id", "applied_wall_ms"),
    "unknown": (),
    "torn_tail": ("torn_bytes", "source"),
}


def _registration(reg: Any) -> tuple[Any, ...]:
    return (
        reg.purgatory,
        reg.operation_id,
        list(reg.keys),
        reg.timeout_ms,
        reg.created_wall_ms,
        reg.due_wall_ms,
        *condition_columns(reg.condition),
        reg.extend_on_resend,
        reg.max_extend_ms,
    )


def _outcome(out: Any) -> tuple[Any, ...]:
    head = (
        out.purgatory,
        out.operation_id,
        _STATES.get(out.state, "UNSPECIFIED"),
        out.sequence,
        out.completed_wall_ms,
        out.lateness_ms,
    )
    if not out.result:
        return (*head, None, None, None, None, None, None, None, None, None, None)
    journaled = purgatory_pb2.JournaledOutcome.FromString(out.result)
    event, condition = journaled.event, journaled.condition
    kind = condition.WhichOneof("kind") or "any_key"
    target: int | None = None
    distinct: bool | None = None
    if kind == "min_signals":
        target, distinct = condition.min_signals.count, condition.min_signals.distinct_sources
    elif kind == "sum_at_least":
        target = condition.sum_at_least.threshold
    elif kind == "values_at_least":
        target = condition.values_at_least.default_target
    result = event.result
    return (
        *head,
        list(event.keys),
        event.create_time_ms,
        event.due_time_ms,
        journaled.timeout_ms,
        result.signal_count,
        list(result.sources),
        result.amount_sum,
        kind,
        target,
        distinct,
    )


def decode_record(payload: bytes | memoryview) -> tuple[str, tuple[Any, ...]]:
    """``(kind, values)`` of one serialized ``JournalRecord``; ``KIND_COLUMNS[kind]`` names them.

    Raises ``google.protobuf.message.DecodeError`` for bytes that do not parse.
    """
    record = journal_pb2.JournalRecord.FromString(payload)  # type: ignore[arg-type]
    kind = record.WhichOneof("record")
    if kind == "registered":
        return kind, _registration(record.registered)
    if kind == "signal":
        sig = record.signal
        value = sig.value if sig.HasField("value") else None
        return kind, (sig.purgatory, sig.key, sig.amount, value, sig.source, sig.applied_wall_ms)
    if kind == "outcome":
        return kind, _outcome(record.outcome)
    if kind == "carried_operation":
        carried = record.carried_operation
        reg = _registration(carried.registration)
        return kind, (*reg, len(carried.progress), carried.source_index)
    if kind == "carried_key_value":
        kv = record.carried_key_value
        return kind, (kv.purgatory, kv.key, kv.value, kv.source_index)
    if kind == "compaction":
        cp = record.compaction
        return kind, (cp.last_sequence, cp.written_wall_ms, cp.dropped_before_index)
    if kind == "rescheduled":
        moved = record.rescheduled
        return kind, (moved.purgatory, moved.operation_id, moved.due_wall_ms)
    if kind in GROUP_AND_SCHEDULE:
        return kind, GROUP_AND_SCHEDULE[kind](getattr(record, kind))
    return "unknown", ()


class _Batcher:
    """Rows of one segment, grouped by kind, cut into Arrow batches of the full schema."""

    def __init__(self, journal: str, segment: str, batch_rows: int) -> None:
        self.journal = journal
        self.segment = segment
        self.batch_rows = batch_rows
        self.rows: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in KIND_COLUMNS}
        self.pending = 0

    def add(self, kind: str, index: int | None, offset: int, values: tuple[Any, ...]) -> bool:
        """Buffer one row; True when a batch is due."""
        self.rows[kind].append((index, offset, *values))
        self.pending += 1
        return self.pending >= self.batch_rows

    def batches(self) -> Iterator[pa.RecordBatch]:
        for kind, rows in self.rows.items():
            if rows:
                yield self._batch(kind, rows)
        self.rows = {kind: [] for kind in KIND_COLUMNS}
        self.pending = 0

    def _batch(self, kind: str, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
        n = len(rows)
        columns = dict(
            zip(("index", "byte_offset", *KIND_COLUMNS[kind]), zip(*rows, strict=True), strict=True)
        )
        arrays = []
        for field in SCHEMA:
            name = field.name
            if name in columns:
                arrays.append(pa.array(columns[name], type=field.type))
            elif name == "kind":
                arrays.append(pa.array([kind] * n, type=field.type))
            elif name == "journal":
                arrays.append(pa.array([self.journal] * n, type=field.type))
            elif name == "segment":
                arrays.append(pa.array([self.segment] * n, type=field.type))
            else:
                arrays.append(pa.nulls(n, type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


# A JournalRecord is one oneof: its first byte is the tag of the kind's field (numbers 1-15
# fit one byte), so a reader that wants some kinds only can skip the others unparsed.
_FIELD_KINDS: Final = {
    field.number: field.name
    for field in journal_pb2.JournalRecord.DESCRIPTOR.oneofs_by_name["record"].fields
    if field.number < 16
}


def _may_be(field_number: int, kinds: frozenset[str]) -> bool:
    """Whether a record whose first tag has ``field_number`` can be one of ``kinds``."""
    known = _FIELD_KINDS.get(field_number)
    return known in kinds if known is not None else "unknown" in kinds


def decode_segment(
    journal: str,
    path: str,
    data: bytes,
    *,
    is_last: bool,
    next_base: int | None = None,
    batch_rows: int = BATCH_ROWS,
    kinds: frozenset[str] | None = None,
    purgatories: frozenset[str] | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of one segment's records, plus a ``torn_tail`` row if one was skipped.

    ``kinds`` and ``purgatories`` (the data source's pushed filters) keep only those rows;
    records of other kinds are framed and CRC-checked but not parsed. ``start``/``stop``:
    only the frames starting in that byte range (see :class:`SegmentReader`).
    """
    reader = SegmentReader(path, data, is_last=is_last, next_base=next_base, start=start, stop=stop)
    batcher = _Batcher(journal, path.rsplit("/", 1)[-1], batch_rows)
    for index, offset, payload in reader:
        if kinds is not None and not _may_be(payload[0] >> 3, kinds):
            continue
        try:
            kind, values = decode_record(payload)
        except DecodeError:
            raise reader.unparsable(index, offset) from None
        if kinds is not None and kind not in kinds:
            continue
        if batcher.add(kind, index, offset, values):
            yield from _only(batcher.batches(), purgatories)
    if reader.torn is not None and (kinds is None or "torn_tail" in kinds):
        torn = reader.torn
        batcher.add("torn_tail", None, torn.offset, (torn.dropped_bytes, torn.reason))
    yield from _only(batcher.batches(), purgatories)


def _only(
    batches: Iterator[pa.RecordBatch], purgatories: frozenset[str] | None
) -> Iterator[pa.RecordBatch]:
    if purgatories is None:
        yield from batches
        return
    wanted = pa.array(sorted(purgatories), type=pa.string())
    for batch in batches:
        kept = batch.filter(pc.is_in(batch.column("purgatory"), value_set=wanted))
        if kept.num_rows:
            yield kept
