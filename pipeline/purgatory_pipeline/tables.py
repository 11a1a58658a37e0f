"""The three tables as transforms of journal records: ``signals``, ``events``, ``operations``.

Pure DataFrame functions (no reads, no writes), so they apply as well to a journal read
directly (``spark.read.format("purgatory-journal")``) as to ``_records``; only rows from
``_records`` carry the ``segment_key`` the incremental merge keys partitions by
(:mod:`purgatory_pipeline.incremental`).

Counting rule (docs/journal.md §2): registrations come from ``registered`` records,
signals from ``signal`` records, outcomes from ``outcome`` records only; compaction's
carried copies are never counted as new events.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline.records import spark_ddl

__all__ = [
    "KEY",
    "OPERATION_KINDS",
    "events_table",
    "operations_table",
    "signals_table",
    "table_schemas",
]

# The partition column that says which journal segment a row comes from (for operations:
# the segment of the operation's first definition, its home; purgatory_pipeline.incremental).
KEY = "segment_key"
_DEFINITION_KINDS = ("registered", "carried_operation")
# The record kinds an operation's row is built from.
OPERATION_KINDS = (*_DEFINITION_KINDS, "rescheduled", "outcome")


def _date(column: str | Column) -> Column:
    """The UTC date of a wall-clock time in ms (the tables' ``date`` partition)."""
    return F.to_date(F.timestamp_millis(F.col(column) if isinstance(column, str) else column))


def _key(raw: DataFrame) -> tuple[str, ...]:
    # Rows read from _records carry their segment_key; a journal read directly has none.
    return (KEY,) if KEY in raw.columns else ()


def signals_table(raw: DataFrame) -> DataFrame:
    return raw.filter(F.col("kind") == "signal").select(
        "purgatory",
        "index",
        "key",
        "amount",
        "value",
        "source",
        "applied_wall_ms",
        _date("applied_wall_ms").alias("date"),
        *_key(raw),
    )


_EVENT_COLUMNS = (
    "sequence",
    "operation_id",
    "state",
    "keys",
    "condition_kind",
    "condition_target",
    "timeout_ms",
    "created_wall_ms",
    "due_wall_ms",
    "completed_wall_ms",
    "lateness_ms",
    "signal_count",
    "sources",
    "amount_sum",
)


def events_table(raw: DataFrame) -> DataFrame:
    return raw.filter(F.col("kind") == "outcome").select(
        "purgatory", "index", *_EVENT_COLUMNS, _date("completed_wall_ms").alias("date"), *_key(raw)
    )


_DEFINITION = (
    "keys",
    "condition_kind",
    "condition_target",
    "distinct_sources",
    "timeout_ms",
    "created_wall_ms",
    "due_wall_ms",
)


def _deadline(moves: Column) -> tuple[Column, Column]:
    """Its latest deadline and how many ``rescheduled`` records moved it.

    The deadline is the ``due_wall_ms`` of the last record, in journal order, that states it
    while the operation is pending: its definition (a registration, or a carried copy, which
    compaction writes with the deadline current at that moment), then every ``rescheduled``
    record (``Reschedule`` and debounced re-sends alike) after it and before its outcome.
    ``moves`` holds those records of the operation as ``(index, rescheduled, due)``.
    """
    start, end = F.col("d.index"), F.col("o.index")
    pending = F.filter(moves, lambda m: (m["index"] >= start) & (end.isNull() | (m["index"] < end)))
    # Indices are unique, so the greatest struct is the one with the latest index.
    moved = F.size(F.filter(pending, lambda m: m["rescheduled"])).cast("bigint")
    return F.array_max(pending)["due"], moved


def operations_table(raw: DataFrame) -> DataFrame:
    """One row per (purgatory, operation_id): first definition joined with first outcome.

    One aggregation per operation (one shuffle, one sort): the first definition (a
    registration before a carried copy, then the earliest), the first outcome, and the
    records that state a deadline, from which :func:`_deadline` picks the one in force.
    Its ``segment_key`` (when ``raw`` has one) is its home: the segment of that definition,
    or of the outcome when no definition survives (:mod:`purgatory_pipeline.incremental`).
    """
    key = _key(raw)
    kind = F.col("kind")
    is_definition = kind.isin(*_DEFINITION_KINDS)
    rank = F.when(kind == "registered", 0).otherwise(1)
    grouped = (
        raw.filter(kind.isin(*OPERATION_KINDS))
        .groupBy("purgatory", "operation_id")
        .agg(
            # min_by skips rows whose ordering is null: only definitions, only outcomes.
            F.min_by(
                F.struct("index", "kind", *_DEFINITION, *key),
                F.when(is_definition, F.struct(rank.alias("rank"), F.col("index"))),
            ).alias("d"),
            F.min_by(
                F.struct(*_EVENT_COLUMNS, "index", *key), F.when(kind == "outcome", F.col("index"))
            ).alias("o"),
            F.collect_list(
                F.when(
                    kind != "outcome",
                    F.struct(
                        F.col("index"),
                        (kind == "rescheduled").alias("rescheduled"),
                        F.col("due_wall_ms").alias("due"),
                    ),
                )
            ).alias("moves"),
        )
    )
    # An id with only deadline moves (its definition and outcome compacted away) is no row.
    found = grouped.filter(F.col("d").isNotNull() | F.col("o").isNotNull())
    latest_due, rescheduled = _deadline(F.col("moves"))
    ended = F.col("o.completed_wall_ms")
    created = F.coalesce(F.col("d.created_wall_ms"), F.col("o.created_wall_ms"))
    home = [F.coalesce(F.col(f"d.{KEY}"), F.col(f"o.{KEY}")).alias(KEY)] if key else []
    return found.select(
        "purgatory",
        "operation_id",
        F.coalesce(F.col("d.keys"), F.col("o.keys")).alias("keys"),
        F.coalesce(F.col("d.condition_kind"), F.col("o.condition_kind")).alias("condition_kind"),
        F.coalesce(F.col("d.condition_target"), F.col("o.condition_target")).alias(
            "condition_target"
        ),
        F.col("d.distinct_sources").alias("distinct_sources"),
        F.coalesce(F.col("d.timeout_ms"), F.col("o.timeout_ms")).alias("timeout_ms"),
        created.alias("created_wall_ms"),
        F.coalesce(latest_due, F.col("o.due_wall_ms")).alias("due_wall_ms"),
        F.coalesce(F.col("d.due_wall_ms"), F.col("o.due_wall_ms")).alias("registered_due_wall_ms"),
        rescheduled.alias("rescheduled"),
        ended.alias("ended_wall_ms"),
        F.coalesce(F.col("o.state"), F.lit("WATCHING")).alias("state"),
        (ended - created).alias("wait_ms"),
        F.when(F.col("o.state") == "EXPIRED", F.col("o.lateness_ms")).alias("lateness_ms"),
        F.col("o.signal_count").alias("signal_count"),
        F.col("o.sources").alias("sources"),
        F.col("o.sequence").alias("sequence"),
        F.col("d.index").alias("registered_index"),
        F.col("d.kind").alias("registered_from"),
        F.col("o.index").alias("outcome_index"),
        _date(created).alias("date"),
        *home,
    )


def table_schemas(spark: Any) -> dict[str, Any]:
    """Each table's schema: the transforms applied to an empty journal (one definition).

    Readers pass it to ``spark.read.schema(...)`` so a table that got no row (no signal in
    a timer-only purgatory, a fresh journal with no record) reads as empty with its
    columns instead of failing schema inference.
    """
    raw = spark.createDataFrame([], f"{spark_ddl()}, {KEY} STRING")
    return {
        "operations": operations_table(raw).schema,
        "signals": signals_table(raw).schema,
        "events": events_table(raw).schema,
    }
