"""``purgatory-pipeline ingest``: journal records -> Parquet operations, signals, events.

Tables (partitioned by ``purgatory``, ``date`` (UTC) and ``segment_key``; schemas in
docs/pipeline.md):

- ``signals``: one row per ``signal`` record.
- ``events``: one row per ``outcome`` record (what subscribers received).
- ``operations``: one row per operation: its registration (or, when compaction deleted
  that, its carried copy, or the definition the outcome repeats) joined with its outcome;
  ``due_wall_ms`` is its latest deadline (after ``rescheduled`` records).

The transforms, and the counting rule they follow, are in :mod:`purgatory_pipeline.tables`.

Idempotence: every row is keyed by ``(purgatory, index)``, the journal index. Planning
reads each segment file once however many of the given paths reach it (a journal listed
twice, or a data directory and one of its journals), so overlapping inputs count once.

Steps: the segments not ingested yet (:mod:`purgatory_pipeline.checkpoint` says which)
are decoded once into ``<out>/_records`` (Parquet, one partition per segment, written by
the decoding tasks themselves: :mod:`purgatory_pipeline.decode_job`). A first or
``--full`` run builds the three tables from all of ``_records`` and replaces the
purgatories it read (other purgatories' partitions are left alone). A re-run after the
journal grew decodes only the new segments and those that changed (the last one, which
grows), and rewrites only the table partitions they change
(:mod:`purgatory_pipeline.incremental`): the same rows as a full run.

Memory: the driver collects per-kind counts and segment keys, and in an incremental run
the operation ids of at most a few segments (:mod:`purgatory_pipeline.id_lookup`), never
anything that grows with the tables. No cached copy of the records: the tables read
``_records``; no step sorts a whole (purgatory, date) partition in one task (see
``_write``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
from pyarrow import fs as pafs
from pyspark.sql import DataFrame, DataFrameReader
from pyspark.sql import functions as F

from purgatory_pipeline import checkpoint
from purgatory_pipeline.decode_job import Piece, decode_pieces, finished
from purgatory_pipeline.errors import TablesNotFoundError, UnsupportedLocationError
from purgatory_pipeline.id_lookup import ArrowTables, IdLookup
from purgatory_pipeline.incremental import (
    HOME,
    SparkLookups,
    drop_partitions,
    drop_purgatories,
    key_column,
    rebuild_scope,
    segment_key,
    unchanged_elsewhere,
)
from purgatory_pipeline.outputs import exists, location, write_text
from purgatory_pipeline.records import spark_ddl
from purgatory_pipeline.source import FORMAT, SegmentPartition, open_uri, plan, split
from purgatory_pipeline.tables import (
    KEY,
    events_table,
    operations_table,
    signals_table,
    table_schemas,
)

log = logging.getLogger(__name__)

TABLES = ("operations", "signals", "events")
PARTITION_COLUMNS = ("purgatory", "date", KEY)
RECORDS = "_records"
# Rows per Parquet file: bounds what one writer buffers, whatever the input size.
MAX_RECORDS_PER_FILE = 1_000_000
# Most pieces a segment is decoded in when few segments are new (source.split).
MAX_PIECES = 8


@dataclass
class IngestSummary:
    """What an ingest read and wrote (also written as ``_ingest.json`` next to the tables)."""

    records: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    torn_tails: int = 0
    torn_bytes: int = 0
    torn_segments: list[str] = field(default_factory=list)
    segments_decoded: int = 0
    # Segments a killed run had decoded whole, taken from _records instead of decoded again.
    segments_resumed: int = 0
    journals: list[str] = field(default_factory=list)


def read_journal(spark: Any, paths: list[str]) -> DataFrame:
    """The raw records of every journal under ``paths`` (see :mod:`purgatory_pipeline.source`)."""
    records: DataFrame = _journal(spark, paths).load()
    return records


def _journal(spark: Any, paths: list[str]) -> DataFrameReader:
    """A reader of the journal source with its schema given: Spark then skips asking the
    source for it, which costs a Python planner process (1.1-1.3 s measured at start-up)."""
    reader: DataFrameReader = spark.read.format(FORMAT).schema(spark_ddl())
    return reader.option("paths", json.dumps(list(paths)))


def read_table(spark: Any, tables: str, name: str) -> DataFrame:
    """One table ``ingest`` wrote under ``tables``, empty (with its schema) if it has no row."""
    if not exists(spark, tables, name):
        raise TablesNotFoundError(
            f"{_out(tables, name)}: no such table (run purgatory-pipeline ingest --out {tables})"
        )
    table: DataFrame = spark.read.schema(table_schemas(spark)[name]).parquet(_out(tables, name))
    return table


def _write(df: DataFrame, path: str, order: str) -> None:
    """Add rows to one table: every task writes its own rows, sorted, in bounded files.

    Append, not overwrite: the caller has deleted the partitions these rows replace
    (:mod:`purgatory_pipeline.incremental`). No repartition by (purgatory, date): that
    made one task sort and write a whole partition, so memory grew with the input. Each
    task (a Parquet split of ``_records``, or a shuffle partition of the operations join)
    sorts only its own rows (spilling as Spark's sorter does) and writes at most
    ``MAX_RECORDS_PER_FILE`` rows per file.
    """
    (
        df.sortWithinPartitions(*PARTITION_COLUMNS, order)
        .write.mode("append")
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


def decode(
    spark: Any,
    journals: list[str],
    out: str,
    parts: list[SegmentPartition],
    keys: dict[str, str],
    *,
    marks: dict[str, checkpoint.Fingerprint] | None = None,
) -> dict[str, checkpoint.Entry]:
    """Decode the segments ``parts`` into ``out/_records``; their ``records`` and ``torn``.

    ``_records`` (the journal's rows, partitioned by segment) is what the tables are built
    from: decoding is the costly step, done once per segment (again only when the segment
    changed: the journal's last one grows), instead of once per table from a cached copy.
    Each segment's partition is deleted first, then written whole. The workers write the
    Parquet files themselves (:mod:`purgatory_pipeline.decode_job`) wherever pyarrow's file
    systems reach ``out``, each with a marker carrying its segment's fingerprint from
    ``marks`` (what makes a killed run resumable); elsewhere (a scheme only Hadoop knows)
    Spark's writer does.
    """
    records = _out(out, RECORDS)
    _make_dir(spark, records)
    for part in parts:
        _drop(spark, f"{records}/{KEY}={keys[part.uri]}")
    target = location(spark, out, RECORDS)
    try:
        open_uri(target)
    except (UnsupportedLocationError, OSError) as exc:
        log.info(
            "ingest: pyarrow cannot write %s (%s); Spark's writer decodes instead", target, exc
        )
        return _decode_through_spark(spark, journals, out, parts, keys)
    pieces = split(parts, _pieces(spark, len(parts)))
    return decode_pieces(
        spark,
        [
            Piece(
                piece, f"{target}/{KEY}={keys[piece.uri]}", number, (marks or {}).get(piece.uri, {})
            )
            for number, piece in enumerate(pieces)
        ],
    )


def _decode_through_spark(
    spark: Any, journals: list[str], out: str, parts: list[SegmentPartition], keys: dict[str, str]
) -> dict[str, checkpoint.Entry]:
    """The journal source read and Spark's Parquet writer, then a count of what it wrote."""
    todo = [part.uri for part in parts]
    raw = _journal(spark, journals).option("pieces", str(_pieces(spark, len(todo))))
    (
        raw.option("only", json.dumps(todo))
        .load()
        .withColumn(KEY, key_column())
        .write.mode("append")
        .option("maxRecordsPerFile", MAX_RECORDS_PER_FILE)
        .partitionBy(KEY)
        .parquet(_out(out, RECORDS))
    )
    return _count(read_records(spark, out), keys, todo)


def _pieces(spark: Any, segments: int) -> int:
    """Pieces per segment so every core has two tasks (a full run: 1; one new segment: more)."""
    cores = int(spark.sparkContext.defaultParallelism)
    return max(1, min(MAX_PIECES, -(-2 * cores // max(segments, 1))))


def _hadoop(spark: Any, uri: str) -> tuple[Any, Any]:
    """``uri``'s Hadoop file system and path, as Spark resolves them."""
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def _drop(spark: Any, uri: str) -> None:
    filesystem, path = _hadoop(spark, uri)
    filesystem.delete(path, True)


def _make_dir(spark: Any, uri: str) -> None:
    filesystem, path = _hadoop(spark, uri)
    filesystem.mkdirs(path)


def read_records(spark: Any, out: str) -> DataFrame:
    """Every record decoded into ``out/_records`` so far (empty, with its columns, if none)."""
    schema = f"{spark_ddl()}, {KEY} STRING"
    table: DataFrame = spark.read.schema(schema).parquet(_out(out, RECORDS))
    return table


def _start(spark: Any, out: str, full: bool) -> dict[str, checkpoint.Entry]:
    """The checkpoint to build on: empty for a full run (after clearing what it replaces).

    A first run (no current checkpoint) keeps ``_records``: segments a killed run had
    decoded completely are taken from there (:func:`_resume`); ``--full`` clears it.
    """
    done = checkpoint.load(spark, out)
    present = [name for name in TABLES if exists(spark, out, name)]
    if done is None and present:
        log.warning("ingest: %s has tables but no current checkpoint; rebuilding them all", out)
        for name in present:
            _drop(spark, _out(out, name))
    elif done and len(present) < len(TABLES):
        log.warning("ingest: %s lacks some of its tables; decoding everything again", out)
        done = None
    if full:
        _drop(spark, _out(out, RECORDS))
    if done is None or full:
        _drop(spark, _out(out, checkpoint.CHECKPOINT))
        return {}
    return done


def _resume(
    spark: Any,
    out: str,
    todo: list[str],
    marks: dict[str, checkpoint.Fingerprint],
    keys: dict[str, str],
    *,
    first: bool,
) -> dict[str, checkpoint.Entry]:
    """Of the segments ``todo``, those ``_records`` already holds whole for their fingerprint.

    A killed run leaves a marker per piece it decoded (:func:`decode_job.finished`); those
    segments are not decoded again, but still count as changed for the tables. A first
    run also deletes every other partition of ``_records`` (a killed run's half-decoded
    segments, segments no longer in the journal), so it builds from the journal alone.
    """
    try:
        filesystem, records = open_uri(location(spark, out, RECORDS))
    except (UnsupportedLocationError, OSError):
        if first:  # no markers without pyarrow (Spark's writer decodes): start afresh
            _drop(spark, _out(out, RECORDS))
        return {}
    found: dict[str, checkpoint.Entry] = {}
    for uri in todo:
        entry = finished(filesystem, f"{records}/{KEY}={keys[uri]}", uri, marks[uri])
        if entry is not None:
            found[uri] = entry
    if first:
        kept = {f"{KEY}={keys[uri]}" for uri in found}
        try:
            infos = filesystem.get_file_info(pafs.FileSelector(records, allow_not_found=True))
        except OSError:
            infos = []
        for info in infos:
            if info.type == pafs.FileType.Directory and info.base_name not in kept:
                filesystem.delete_dir(info.path)
    return found


def write_all(spark: Any, out: str, records: DataFrame) -> None:
    """A full build: every table from all of ``records``, replacing their purgatories."""
    present = [name for name in TABLES if exists(spark, out, name)]
    if present:  # a first run found none (_start dropped them): nothing to list
        _step(spark, "ingest: list purgatories")
        names = [row[0] for row in records.select("purgatory").distinct().collect() if row[0]]
        for name in present:
            drop_purgatories(spark, _out(out, name), names)
    _write_tables(
        spark, out, signals_table(records), events_table(records), operations_table(records)
    )


def merge(
    spark: Any,
    out: str,
    records: DataFrame,
    changed: set[str],
    *,
    before_drop: Callable[[set[str]], None],
) -> None:
    """An incremental build: rewrite only the partitions ``changed`` segments change.

    ``before_drop(rebuilt)`` runs before any partition is deleted: it must make a run that
    fails after it rebuild ``rebuilt`` again (the batch ingest forgets those segments in
    its checkpoint; the stream notes them as pending).
    """
    new = records.filter(F.col(KEY).isin(sorted(changed)))
    old = read_table(spark, out, "operations").select("purgatory", "operation_id", HOME)
    lookup = IdLookup(spark, SparkLookups(old, records), _arrow_tables(spark, out))
    _step(spark, f"ingest: find the operations {len(changed)} new segments touch")
    rebuilt = changed | lookup.homes(changed)
    before_drop(rebuilt)
    scope = rebuild_scope(records, rebuilt)
    operations = operations_table(scope)
    operations = operations.filter(F.col(HOME).isin(sorted(rebuilt)))
    operations = unchanged_elsewhere(operations, lookup.elsewhere(rebuilt))
    for name in ("signals", "events"):
        drop_partitions(spark, _out(out, name), changed)
    drop_partitions(spark, _out(out, "operations"), rebuilt)
    log.info("ingest: rewriting %d segment partitions of operations", len(rebuilt))
    _write_tables(spark, out, signals_table(new), events_table(new), operations)


def _arrow_tables(spark: Any, out: str) -> ArrowTables | None:
    """``out``'s _records and operations as pyarrow opens them; None where it cannot."""
    try:
        filesystem, records = open_uri(location(spark, out, RECORDS))
        _, operations = open_uri(location(spark, out, "operations"))
    except (UnsupportedLocationError, OSError) as exc:
        log.info("ingest: pyarrow cannot read %s (%s); Spark looks the ids up", out, exc)
        return None
    return ArrowTables(filesystem, records, operations)


def _write_tables(
    spark: Any, out: str, signals: DataFrame, events: DataFrame, operations: DataFrame
) -> None:
    tables = {
        "signals": (signals, "index"),
        "events": (events, "sequence"),
        "operations": (operations, "operation_id"),
    }
    for name, (df, order) in tables.items():
        _step(spark, f"ingest: write {name}")
        _write(df, _out(out, name), order)


def _count(records: DataFrame, keys: dict[str, str], todo: list[str]) -> dict[str, Any]:
    """The checkpoint entries' ``records`` and ``torn`` for the segments ``todo``."""
    by_key = {keys[uri]: uri for uri in todo}
    entries: dict[str, Any] = {uri: {"records": {}, "torn": []} for uri in todo}
    decoded = records.filter(F.col(KEY).isin(sorted(by_key)))
    for row in decoded.groupBy(KEY, "kind").count().collect():
        entries[by_key[row[KEY]]]["records"][row["kind"]] = row["count"]
    torn = decoded.filter(F.col("kind") == "torn_tail")
    for row in torn.select(KEY, "byte_offset", "torn_bytes").collect():
        entries[by_key[row[KEY]]]["torn"].append([row["byte_offset"], row["torn_bytes"]])
    return entries


def _operation_rows(spark: Any, out: str) -> int:
    """Rows of ``out``'s operations table: its Parquet footers where pyarrow reaches it."""
    arrow = _arrow_tables(spark, out)
    if arrow is not None:
        try:
            return arrow.operation_rows()
        except (OSError, pa.ArrowInvalid) as exc:
            log.info("ingest: pyarrow cannot count %s's operations (%s); Spark does", out, exc)
    return int(read_table(spark, out, "operations").count())


def _decode_line(decoding: int, segments: int, resumed: int) -> str:
    line = f"ingest: decode {decoding} of {segments} segments"
    return f"{line} ({resumed} decoded by an earlier run)" if resumed else line


def _summarize(summary: IngestSummary, entries: dict[str, checkpoint.Entry]) -> None:
    """Every ingested segment's counts, added up (deleted segments' rows stay in _records)."""
    for uri, entry in sorted(entries.items()):
        for kind, count in entry.get("records", {}).items():
            if kind != "torn_tail":
                summary.records[kind] = summary.records.get(kind, 0) + count
        for offset, dropped in entry.get("torn", []):
            summary.torn_tails += 1
            summary.torn_bytes += dropped
            summary.torn_segments.append(f"{uri.rsplit('/', 1)[-1]}@{offset}")
    summary.records = dict(sorted(summary.records.items()))


def ingest(spark: Any, journals: list[str], out: str, *, full: bool = False) -> IngestSummary:
    """Read ``journals`` and write the three tables under ``out``; return what was done.

    Incremental by default: segments already decoded into ``out``, unchanged since (see
    :mod:`purgatory_pipeline.checkpoint`) are not read again, and only the table
    partitions that the new ones change are rewritten, so the tables equal what a full
    run writes. ``full`` starts afresh (as does a first run, or one over tables an older
    version wrote).
    """
    done = _start(spark, out, full)
    first = not done
    parts = plan(journals)
    todo, marks = checkpoint.to_decode(parts, done)
    keys = {part.uri: segment_key(part.journal, part.uri) for part in parts}
    resumed = _resume(spark, out, todo, marks, keys, first=first)
    wanted = set(todo) - set(resumed)
    _step(spark, _decode_line(len(wanted), len(parts), len(resumed)))
    counted = decode(
        spark, journals, out, [part for part in parts if part.uri in wanted], keys, marks=marks
    )
    counted.update(resumed)
    records = read_records(spark, out)
    for uri, entry in counted.items():
        for offset, dropped in entry["torn"]:
            log.warning(
                "ingest: torn tail skipped in %s at byte %d (%d bytes), as recovery does",
                uri,
                offset,
                dropped,
            )
    records = records.filter(F.col("kind") != "torn_tail")
    if first:
        write_all(spark, out, records)
    elif todo:
        # Forget the rebuilt segments before deleting their partitions: if this run fails
        # part-way, the next one decodes them again and rebuilds what was deleted.
        def forget(rebuilt: set[str]) -> None:
            kept = {u: m for u, m in done.items() if keys.get(u) not in rebuilt}
            checkpoint.save(spark, out, kept)

        merge(spark, out, records, {keys[uri] for uri in todo}, before_drop=forget)
    entries = {**done, **{uri: {**marks[uri], **counted[uri]} for uri in todo}}
    checkpoint.save(spark, out, entries)
    summary = IngestSummary(
        segments_decoded=len(wanted), segments_resumed=len(resumed), journals=list(journals)
    )
    _summarize(summary, entries)
    _step(spark, "ingest: count operations")
    summary.rows = {
        "signals": summary.records.get("signal", 0),
        "events": summary.records.get("outcome", 0),
        "operations": _operation_rows(spark, out),
    }
    spark.sparkContext.setJobDescription(None)
    write_text(spark, out, "_ingest.json", json.dumps(asdict(summary), indent=2) + "\n")
    return summary
