"""``purgatory-pipeline ingest``: journal records -> Parquet operations, signals, events.

Tables (partitioned by ``purgatory`` and ``date``, UTC; schemas in docs/pipeline.md):

- ``signals``: one row per ``signal`` record.
- ``events``: one row per ``outcome`` record (what subscribers received).
- ``operations``: one row per operation: its registration (or, when compaction deleted
  that, its carried copy, or the definition the outcome repeats) joined with its outcome;
  ``due_wall_ms`` is its latest deadline (after ``rescheduled`` records).

Counting rule (docs/journal.md §2): registrations come from ``registered`` records,
signals from ``signal`` records, outcomes from ``outcome`` records only; compaction's
carried copies are never counted as new events.

Idempotence: every row is keyed by ``(purgatory, index)``, the journal index. Planning
reads each segment file once however many of the given paths reach it (a journal listed
twice, or a data directory and one of its journals), so overlapping inputs count once.
Output is written with dynamic partition overwrite and rows sorted within each file:
re-running over the same input replaces exactly the partitions it produces with the same
rows; partitions of other purgatories or dates are left alone.

Steps: the segments not ingested yet are decoded once into ``<out>/_records`` (Parquet,
one partition per segment; :mod:`purgatory_pipeline.checkpoint` says which), then the
three tables are built from all of ``_records``. A re-run after the journal grew decodes
only the new segments and those that changed (the last one, which grows).

Memory: nothing record-level reaches the driver; it collects only per-kind counts. No
cached copy of the records: the tables read ``_records``; no step sorts a whole
(purgatory, date) partition in one task (see ``_write``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline import checkpoint
from purgatory_pipeline.errors import TablesNotFoundError
from purgatory_pipeline.outputs import exists, write_text
from purgatory_pipeline.records import spark_ddl
from purgatory_pipeline.source import FORMAT, plan

log = logging.getLogger(__name__)

TABLES = ("operations", "signals", "events")
PARTITION_COLUMNS = ("purgatory", "date")
RECORDS = "_records"
# Rows per Parquet file: bounds what one writer buffers, whatever the input size.
MAX_RECORDS_PER_FILE = 1_000_000


@dataclass
class IngestSummary:
    """What an ingest read and wrote (also written as ``_ingest.json`` next to the tables)."""

    records: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    torn_tails: int = 0
    torn_bytes: int = 0
    torn_segments: list[str] = field(default_factory=list)
    segments_decoded: int = 0
    journals: list[str] = field(default_factory=list)


def _date(column: str) -> Any:
    return F.to_date(F.timestamp_millis(F.col(column)))


def read_journal(spark: Any, paths: list[str]) -> DataFrame:
    """The raw records of every journal under ``paths`` (see :mod:`purgatory_pipeline.source`)."""
    records: DataFrame = spark.read.format(FORMAT).option("paths", json.dumps(list(paths))).load()
    return records


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
        "purgatory", "index", *_EVENT_COLUMNS, _date("completed_wall_ms").alias("date")
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


def _deadlines(raw: DataFrame, first_def: DataFrame, first_out: DataFrame) -> DataFrame:
    """Per operation: its latest deadline and how many ``rescheduled`` records moved it.

    The deadline is the ``due_wall_ms`` of the last record, in journal order, that states it
    while the operation is pending: its definition (a registration, or a carried copy, which
    compaction writes with the deadline current at that moment), then every ``rescheduled``
    record (``Reschedule`` and debounced re-sends alike) after it and before its outcome.
    """
    moves = raw.filter(F.col("kind").isin("registered", "carried_operation", "rescheduled")).select(
        "purgatory", "operation_id", "index", "kind", "due_wall_ms"
    )
    bounds = first_def.select(
        "purgatory", "operation_id", F.col("d.index").alias("from_index")
    ).join(
        first_out.select("purgatory", "operation_id", F.col("o.index").alias("to_index")),
        ["purgatory", "operation_id"],
        "left",
    )
    window = moves.join(bounds, ["purgatory", "operation_id"]).filter(
        (F.col("index") >= F.col("from_index"))
        & (F.col("to_index").isNull() | (F.col("index") < F.col("to_index")))
    )
    return window.groupBy("purgatory", "operation_id").agg(
        F.max_by("due_wall_ms", "index").alias("latest_due_wall_ms"),
        F.count(F.when(F.col("kind") == "rescheduled", 1)).alias("rescheduled"),
    )


def operations_table(raw: DataFrame, events: DataFrame) -> DataFrame:
    """One row per (purgatory, operation_id): first definition joined with first outcome."""
    defs = raw.filter(F.col("kind").isin("registered", "carried_operation")).withColumn(
        "rank", F.when(F.col("kind") == "registered", 0).otherwise(1)
    )
    first_def = defs.groupBy("purgatory", "operation_id").agg(
        F.min_by(F.struct("index", "kind", *_DEFINITION), F.struct("rank", "index")).alias("d")
    )
    first_out = events.groupBy("purgatory", "operation_id").agg(
        F.min_by(F.struct(*_EVENT_COLUMNS, "index"), F.col("index")).alias("o")
    )
    joined = first_def.join(first_out, ["purgatory", "operation_id"], "full_outer").join(
        _deadlines(raw, first_def, first_out), ["purgatory", "operation_id"], "left"
    )
    ended = F.col("o.completed_wall_ms")
    created = F.coalesce(F.col("d.created_wall_ms"), F.col("o.created_wall_ms"))
    return joined.select(
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
        F.coalesce(F.col("latest_due_wall_ms"), F.col("o.due_wall_ms")).alias("due_wall_ms"),
        F.coalesce(F.col("d.due_wall_ms"), F.col("o.due_wall_ms")).alias("registered_due_wall_ms"),
        F.coalesce(F.col("rescheduled"), F.lit(0)).alias("rescheduled"),
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
        F.to_date(F.timestamp_millis(created)).alias("date"),
    )


def table_schemas(spark: Any) -> dict[str, Any]:
    """Each table's schema: the transforms applied to an empty journal (one definition).

    Readers pass it to ``spark.read.schema(...)`` so a table that got no row (no signal in
    a timer-only purgatory, a fresh journal with no record) reads as empty with its
    columns instead of failing schema inference.
    """
    raw = spark.createDataFrame([], spark_ddl())
    events = events_table(raw)
    return {
        "operations": operations_table(raw, events).schema,
        "signals": signals_table(raw).schema,
        "events": events.schema,
    }


def read_table(spark: Any, tables: str, name: str) -> DataFrame:
    """One table ``ingest`` wrote under ``tables``, empty (with its schema) if it has no row."""
    if not exists(spark, tables, name):
        raise TablesNotFoundError(
            f"{_out(tables, name)}: no such table (run purgatory-pipeline ingest --out {tables})"
        )
    table: DataFrame = spark.read.schema(table_schemas(spark)[name]).parquet(_out(tables, name))
    return table


def _write(df: DataFrame, path: str, order: str) -> None:
    """Write one table: every task writes its own rows, sorted, in files of bounded size.

    No repartition by (purgatory, date): that made one task sort and write a whole
    partition, so memory grew with the input. Each task (a Parquet split of ``_records``,
    or a shuffle partition of the operations join) sorts only its own rows (spilling as
    Spark's sorter does) and writes at most ``MAX_RECORDS_PER_FILE`` rows per file.
    """
    (
        df.sortWithinPartitions(*PARTITION_COLUMNS, order)
        .write.mode("overwrite")
        .option("maxRecordsPerFile", MAX_RECORDS_PER_FILE)
        .partitionBy(*PARTITION_COLUMNS)
        .parquet(path)
    )


def _out(out: str, name: str) -> str:
    return out.rstrip("/") + "/" + name


def _step(spark: Any, text: str) -> None:
    """Name the jobs that follow in the Spark UI and log the step."""
    spark.sparkContext.setJobDescription(text)
    log.info("%s", text)


def decode(spark: Any, journals: list[str], out: str, *, full: bool) -> int:
    """Decode the segments not yet in ``out/_records`` into it; returns how many were read.

    ``_records`` (the journal's rows, partitioned by segment) is what the tables are built
    from: decoding is the costly step, done once per segment (again only when the segment
    changed: the journal's last one grows), instead of once per table from a cached copy.
    """
    if full:
        _drop(spark, _out(out, RECORDS))
        _drop(spark, _out(out, checkpoint.CHECKPOINT))
    parts = plan(journals)
    done = {} if full else checkpoint.load(spark, out)
    todo, marks = checkpoint.to_decode(parts, done)
    _step(spark, f"ingest: decode {len(todo)} of {len(parts)} segments")
    if todo or not exists(spark, out, RECORDS):
        raw = spark.read.format(FORMAT).option("paths", json.dumps(list(journals)))
        records = raw.option("only", json.dumps(todo)).load()
        keyed = records.withColumn("segment_key", _segment_key())
        (
            keyed.write.mode("overwrite")
            .option("maxRecordsPerFile", MAX_RECORDS_PER_FILE)
            .partitionBy("segment_key")
            .parquet(_out(out, RECORDS))
        )
    checkpoint.save(spark, out, {**done, **marks})
    return len(todo)


def _segment_key() -> Any:
    # Stable across runs for the same file: the journal's location and the segment's name.
    return F.substring(F.sha2(F.concat_ws("|", "journal", "segment"), 256), 1, 20)


def _drop(spark: Any, uri: str) -> None:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(path, True)


def read_records(spark: Any, out: str) -> DataFrame:
    """Every record decoded into ``out/_records`` so far (empty, with its columns, if none)."""
    schema = f"{spark_ddl()}, segment_key STRING"
    table: DataFrame = spark.read.schema(schema).parquet(_out(out, RECORDS))
    return table


def ingest(spark: Any, journals: list[str], out: str, *, full: bool = False) -> IngestSummary:
    """Read ``journals`` and write the three tables under ``out``; return what was done.

    Incremental by default: segments already decoded into ``out``, unchanged since (see
    :mod:`purgatory_pipeline.checkpoint`) are not read again; the tables are rebuilt from
    all decoded records, so they equal what a full run writes. ``full`` starts afresh.
    """
    decoded = decode(spark, journals, out, full=full)
    raw = read_records(spark, out)
    torn = raw.filter(F.col("kind") == "torn_tail")
    records = raw.filter(F.col("kind") != "torn_tail")
    summary = IngestSummary(segments_decoded=decoded, journals=list(journals))
    _step(spark, "ingest: count records by kind")
    for row in records.groupBy("kind").count().collect():
        summary.records[row["kind"]] = row["count"]
    for row in torn.select("segment", "byte_offset", "torn_bytes").collect():
        summary.torn_tails += 1
        summary.torn_bytes += row["torn_bytes"]
        summary.torn_segments.append(f"{row['segment']}@{row['byte_offset']}")
        log.warning(
            "ingest: torn tail skipped in %s at byte %d (%d bytes), as recovery does",
            row["segment"],
            row["byte_offset"],
            row["torn_bytes"],
        )
    events = events_table(records)
    tables = {
        "signals": (signals_table(records), "index"),
        "events": (events, "sequence"),
        "operations": (operations_table(records, events), "operation_id"),
    }
    for name, (df, order) in tables.items():
        _step(spark, f"ingest: write {name}")
        _write(df, _out(out, name), order)
    _step(spark, "ingest: count operations")
    summary.rows = {
        "signals": summary.records.get("signal", 0),
        "events": summary.records.get("outcome", 0),
        "operations": read_table(spark, out, "operations").count(),
    }
    spark.sparkContext.setJobDescription(None)
    write_text(spark, out, "_ingest.json", json.dumps(asdict(summary), indent=2) + "\n")
    return summary
