"""Decoding segments into ``<out>/_records``: each task decodes a piece and writes its Parquet.

Why the Python workers write the files themselves (pyarrow) instead of handing their Arrow
batches to Spark's writer: the hand-over turns every batch into JVM rows that Spark's
Parquet writer then encodes again, and that cost more than the decoding itself. Measured on
one 833,333-record segment (bench journal, 2-core host): Python decoding 7.1-8.2 s of CPU,
the JVM's share of the same Spark job 12.0 s of CPU; pyarrow writes the decoded batches in
0.9 s. Writing them where they are decoded leaves the JVM only the scheduling.

The job: one task per piece (:func:`purgatory_pipeline.source.split`), launched with
``mapInArrow`` over ``spark.range`` (no data source planning, which costs a Python planner
process per query). A task writes ``_records/segment_key=K/part-NNNNN.parquet`` (the name is
the piece's, so a task attempted again replaces its file instead of adding one; it is
written under a hidden name of its own, which Spark's readers skip, and moved into place)
and returns one summary row: its records per kind and the torn tails it skipped. The
driver adds those up per segment for the checkpoint, so no second pass counts the decoded
records.

Resumable: once its Parquet file is in place, a task also writes
``_decoded-part-NNNNN.json`` beside it (hidden from Spark's readers by the leading ``_``):
the segment's fingerprint as the driver planned it, the piece's byte range, its counts.
A run killed part-way leaves those behind for every piece that finished; the next run
(:func:`finished`) takes a segment whose pieces' markers cover it from byte 0 to its end,
all with the fingerprint the segment has now, as decoded, and decodes only the others. A
segment whose markers are incomplete, or were written for other bytes, is decoded again
(its partition is deleted first, markers included).

Thread and process contract: :func:`decode_pieces` runs on the driver;
:func:`_decode_task` runs in Spark's Python workers and touches only the piece it is given.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from purgatory_pipeline.records import SCHEMA
from purgatory_pipeline.source import SegmentPartition, open_uri, read_partition

__all__ = ["MARKER_PREFIX", "SUMMARY_DDL", "Piece", "decode_pieces", "finished"]

# Rows per Parquet row group: small enough that a filter on ``index`` (incremental ingest's
# rebuild scope) skips most of an older segment, large enough to read in big vectors.
ROW_GROUP_ROWS: Final = 131_072
SUMMARY_DDL: Final = (
    "uri STRING, records MAP<STRING, BIGINT>, torn ARRAY<STRUCT<offset: BIGINT, bytes: BIGINT>>"
)
# Dictionary-encoded columns: the repetitive strings. Not the ids nor the numbers: nearly
# every value is new, so each column chunk would fill a dictionary page, give up and go on
# plain, and Spark's reader decodes such mixed chunks more slowly (measured: the tables
# built 1.5x slower from files written that way).
_DICTIONARY: Final = tuple(
    field.name
    for field in SCHEMA
    if field.name != "operation_id"
    and (field.type == pa.string() or field.type == pa.list_(pa.string()))
)
_SUMMARY: Final = pa.schema(
    [
        ("uri", pa.string()),
        ("records", pa.map_(pa.string(), pa.int64())),
        ("torn", pa.list_(pa.struct([("offset", pa.int64()), ("bytes", pa.int64())]))),
    ]
)


MARKER_PREFIX: Final = "_decoded-"


@dataclass(frozen=True)
class Piece:
    """One task's work: the piece to decode, the directory its Parquet file goes to, and the
    segment's fingerprint (``checkpoint.fingerprint``) that its marker records."""

    part: SegmentPartition
    directory: str
    number: int
    mark: dict[str, int] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        """What the worker needs, as plain values (pickled into the task's function)."""
        name = f"part-{self.number:05d}.parquet"
        return {"part": asdict(self.part), "dir": self.directory, "name": name, "mark": self.mark}


def finished(
    filesystem: Any, directory: str, uri: str, mark: dict[str, int]
) -> dict[str, Any] | None:
    """The entry (``records``, ``torn``) of segment ``uri`` if a run decoded all of it into
    ``directory`` for the fingerprint ``mark``; None if any of it is missing or stale."""
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    except OSError:
        return None
    markers = []
    for info in infos:
        if info.base_name.startswith(MARKER_PREFIX) and info.base_name.endswith(".json"):
            with filesystem.open_input_stream(info.path) as stream:
                markers.append(json.loads(stream.read()))
    if not markers or any(m["uri"] != uri or m["mark"] != mark for m in markers):
        return None
    markers.sort(key=lambda m: int(m["start"]))
    ends = [0, *(m["stop"] for m in markers)]
    if ends[-1] is not None or [m["start"] for m in markers] != ends[:-1]:
        return None  # the pieces do not cover the segment from its header to its end
    records: dict[str, int] = {}
    torn: list[list[int]] = []
    for marker in markers:
        for kind, count in marker["records"].items():
            records[kind] = records.get(kind, 0) + count
        torn.extend([tail["offset"], tail["bytes"]] for tail in marker["torn"])
    return {"records": dict(sorted(records.items())), "torn": sorted(torn)}


def decode_pieces(spark: Any, pieces: Sequence[Piece]) -> dict[str, dict[str, Any]]:
    """Decode and write every piece; per segment URI, ``{"records": {kind: n}, "torn": [...]}``.

    Every segment of ``pieces`` gets an entry, empty counts included (a header-only segment).
    """
    entries: dict[str, dict[str, Any]] = {
        piece.part.uri: {"records": {}, "torn": []} for piece in pieces
    }
    if not pieces:
        return entries
    specs = tuple(piece.spec() for piece in pieces)
    tasks = spark.range(0, len(specs), 1, len(specs))
    rows = tasks.mapInArrow(functools.partial(_decode_task, specs), SUMMARY_DDL).collect()
    for row in rows:
        entry = entries[row["uri"]]
        for kind, count in (row["records"] or {}).items():
            entry["records"][kind] = entry["records"].get(kind, 0) + count
        entry["torn"].extend([tail["offset"], tail["bytes"]] for tail in row["torn"] or [])
    for entry in entries.values():
        entry["records"] = dict(sorted(entry["records"].items()))
        entry["torn"].sort()
    return entries


def _decode_task(
    specs: Sequence[dict[str, Any]], ids: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Worker side: decode the pieces whose numbers arrive in ``ids`` (one per task)."""
    for batch in ids:
        for number in batch.column(0).to_pylist():
            yield _decode_piece(specs[number])


def _decode_piece(spec: dict[str, Any]) -> pa.RecordBatch:
    part = SegmentPartition(**spec["part"])
    counts: dict[str, int] = {}
    torn: list[dict[str, int]] = []
    filesystem, directory = open_uri(spec["dir"])
    target = f"{directory}/{spec['name']}"
    # Unique per attempt: two attempts of one task (a retry beside a slow first try) must
    # not write into one file; whichever moves last leaves the file, whole either way.
    hidden = f"{directory}/.{spec['name']}.{uuid.uuid4().hex}.tmp"
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = []
    held = 0
    written = False
    try:
        for batch in read_partition(part):
            _count(batch, counts, torn)
            pending.append(batch)
            held += batch.num_rows
            if held >= ROW_GROUP_ROWS:
                writer = _flush(writer, filesystem, directory, hidden, pending)
                pending, held = [], 0
        if pending:
            writer = _flush(writer, filesystem, directory, hidden, pending)
        written = True
    finally:
        if writer is not None:
            writer.close()
            if not written:  # decoding failed (corruption): leave no half file behind
                filesystem.delete_file(hidden)
    if writer is not None:
        filesystem.move(hidden, target)
    _mark_done(filesystem, directory, spec, part, counts=counts, torn=torn)
    return pa.RecordBatch.from_pylist(
        [{"uri": part.uri, "records": list(counts.items()), "torn": torn}], schema=_SUMMARY
    )


def _mark_done(
    filesystem: Any,
    directory: str,
    spec: dict[str, Any],
    part: SegmentPartition,
    *,
    counts: dict[str, int],
    torn: list[dict[str, int]],
) -> None:
    """Write the piece's marker (see the module docstring), under a hidden name, then move it."""
    body = {
        "uri": part.uri,
        "mark": spec["mark"],
        "start": part.start,
        "stop": part.stop,
        "records": counts,
        "torn": torn,
    }
    filesystem.create_dir(directory, recursive=True)
    name = MARKER_PREFIX + spec["name"].removesuffix(".parquet") + ".json"
    hidden = f"{directory}/.{name}.{uuid.uuid4().hex}.tmp"
    with filesystem.open_output_stream(hidden) as stream:
        stream.write(json.dumps(body).encode())
    filesystem.move(hidden, f"{directory}/{name}")


def _flush(
    writer: pq.ParquetWriter | None,
    filesystem: Any,
    directory: str,
    hidden: str,
    batches: list[pa.RecordBatch],
) -> pq.ParquetWriter:
    table = pa.Table.from_batches(batches)
    if writer is None:
        filesystem.create_dir(directory, recursive=True)
        writer = pq.ParquetWriter(
            hidden, table.schema, filesystem=filesystem, use_dictionary=list(_DICTIONARY)
        )
    writer.write_table(table, row_group_size=len(table))
    return writer


def _count(batch: pa.RecordBatch, counts: dict[str, int], torn: list[dict[str, int]]) -> None:
    kinds = batch.column("kind")
    seen = pc.value_counts(kinds).to_pylist()
    for item in seen:
        counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]
    if any(item["values"] == "torn_tail" for item in seen):
        tails = batch.filter(pc.equal(kinds, "torn_tail"))
        for offset, dropped in zip(
            tails.column("byte_offset").to_pylist(),
            tails.column("torn_bytes").to_pylist(),
            strict=True,
        ):
            torn.append({"offset": offset, "bytes": dropped})
