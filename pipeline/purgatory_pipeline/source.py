"""``spark.read.format("purgatory-journal")``: a PySpark Python Data Source over journal files.

Planning (driver): the paths given are expanded into journals (a directory holding
``*.seg`` files; a data directory ``<data_dir>/<purgatory>/journal/``; or single segment
files) and each segment becomes one input partition. The driver only lists names: it
never reads record data, so its memory does not grow with the journal.

Reading (workers): each partition reads its segment through ``pyarrow.fs`` (local paths,
``file://`` and every scheme pyarrow's file systems open: ``hdfs://``, ``s3://``,
``gs://``, ``abfs://``) and yields Arrow record batches (:mod:`purgatory_pipeline.records`).
A partition knows whether its segment is the journal's last (only there is a torn tail
possible) and the next segment's base index (so a missing segment is corruption, as in
recovery). A segment deleted by compaction between listing and reading is skipped, as
docs/journal.md §2 asks of live readers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import fs as pafs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

from purgatory_pipeline.errors import NotAJournalError, UnsupportedLocationError
from purgatory_pipeline.records import decode_segment, spark_ddl
from purgatory_pipeline.segment import segment_base

log = logging.getLogger(__name__)

FORMAT = "purgatory-journal"


@dataclass
class SegmentPartition(InputPartition):
    """One segment file of one journal, or a piece of it (pickled to the worker that reads it).

    ``start``/``stop``: the piece's byte range (frames that start in it); the whole file by
    default. ``size``: how many bytes of the file the pieces read, all the same (the size
    when planned: the journal's head may grow meanwhile, and pieces that saw different
    ends would disagree about where a torn tail is). See :func:`split`.
    """

    journal: str
    uri: str
    is_last: bool
    next_base: int | None
    start: int = 0
    stop: int | None = None
    size: int | None = None


def open_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri if "://" in uri else _absolute(uri))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        scheme = uri.partition("://")[0]
        raise UnsupportedLocationError(
            f"{uri}: the journal reader cannot open {scheme}:// URIs ({exc}); it opens local "
            "paths, file://, hdfs://, s3://, gs:// and abfs:// (pyarrow's file systems), so "
            "give s3:// for s3a://, or copy the journal"
        ) from None
    return filesystem, path


def _absolute(path: str) -> str:
    import os  # noqa: PLC0415 - only local paths need it

    return os.path.abspath(path)


def _join(uri: str, name: str) -> str:
    return uri.rstrip("/") + "/" + name


def _segments_in(filesystem: pafs.FileSystem, path: str) -> list[tuple[int, str]]:
    infos = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    found = []
    for info in infos:
        base = segment_base(info.base_name)
        if base is not None and info.type == pafs.FileType.File:
            found.append((base, info.base_name))
    found.sort()
    return found


def _journal_partitions(journal: str, segments: list[tuple[int, str]]) -> list[SegmentPartition]:
    parts = []
    for position, (_base, name) in enumerate(segments):
        last = position == len(segments) - 1
        next_base = None if last else segments[position + 1][0]
        parts.append(SegmentPartition(journal, _join(journal, name), last, next_base))
    return parts


def plan(paths: Sequence[str]) -> list[SegmentPartition]:
    """One partition per segment of every journal under ``paths`` (driver side, names only)."""
    if not paths:
        raise NotAJournalError("no journal path given (load(PATH) or option('paths', ...))")
    parts: list[SegmentPartition] = []
    for given in paths:
        uri = given if "://" in given else _absolute(given)
        filesystem, path = open_uri(uri)
        info = filesystem.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise NotAJournalError(f"{given}: no such file or directory")
        if info.type == pafs.FileType.File:
            # A single file: it must be a segment; it may be a journal's head, so a torn
            # tail in it is tolerated as recovery would if it were the last one.
            parts.append(SegmentPartition(uri, uri, True, None))
            continue
        segments = _segments_in(filesystem, path)
        if segments:
            parts.extend(_journal_partitions(uri, segments))
            continue
        found = _data_dir_journals(filesystem, uri, path)
        if not found:
            raise NotAJournalError(
                f"{given}: holds no journal (no NNNNNNNNNNNNNNNNNNNN.seg files in it, "
                "in its journal/ or in <purgatory>/journal/ below it)"
            )
        parts.extend(found)
    unique: dict[str, SegmentPartition] = {}
    for part in parts:  # overlapping paths (a data dir and one of its journals) read once
        unique.setdefault(part.uri, part)
    return list(unique.values())


# A piece smaller than this is not worth its task (each piece reads its whole segment).
MIN_PIECE_BYTES = 8 << 20


def split(parts: list[SegmentPartition], pieces: int) -> list[SegmentPartition]:
    """Each segment cut into up to ``pieces`` byte ranges of at least ``MIN_PIECE_BYTES``.

    Why: a segment is otherwise one task, so a run that decodes one new segment (an
    incremental ingest) uses one core. Each piece reads the whole file and walks its
    frames from the header (an index is known only by counting), but parses only its own:
    the walk is a CRC per frame, the parse is what costs.
    """
    if pieces <= 1:
        return parts
    out: list[SegmentPartition] = []
    for part in parts:
        filesystem, path = open_uri(part.uri)
        size = filesystem.get_file_info(path).size or 0
        for start, stop in piece_bounds(size, pieces):
            out.append(
                SegmentPartition(
                    part.journal, part.uri, part.is_last, part.next_base, start, stop, size
                )
            )
    return out


def piece_bounds(
    size: int, pieces: int, min_bytes: int = MIN_PIECE_BYTES
) -> list[tuple[int, int | None]]:
    """``(start, stop)`` byte ranges that cover a file of ``size`` bytes, in order.

    The first starts at 0 (it owns the header), the last has no stop (it owns the end and
    checks the next segment's base), and each is at least ``min_bytes`` long.
    """
    count = max(1, min(pieces, size // max(min_bytes, 1)))
    cuts = [size * i // count for i in range(1, count)]
    return list(zip([0, *cuts], [*cuts, None], strict=True))


def _data_dir_journals(filesystem: pafs.FileSystem, uri: str, path: str) -> list[SegmentPartition]:
    parts: list[SegmentPartition] = []
    candidates = [("journal", path + "/journal")]
    for info in filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
        if info.type == pafs.FileType.Directory:
            candidates.append((info.base_name + "/journal", info.path + "/journal"))
    for relative, sub in sorted(candidates):
        segments = _segments_in(filesystem, sub)
        if segments:
            parts.extend(_journal_partitions(_join(uri, relative), segments))
    return parts


def read_partition(
    part: SegmentPartition,
    kinds: frozenset[str] | None = None,
    purgatories: frozenset[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode one segment (worker side), keeping only ``kinds`` / ``purgatories`` if given."""
    filesystem, path = open_uri(part.uri)
    try:
        with filesystem.open_input_file(path) as handle:
            data = handle.readall() if part.size is None else handle.read(part.size)
    except FileNotFoundError:
        log.warning("segment %s disappeared before it was read (compaction); skipped", part.uri)
        return
    yield from decode_segment(
        part.journal,
        part.uri,
        data,
        is_last=part.is_last,
        next_base=part.next_base,
        kinds=kinds,
        purgatories=purgatories,
        start=part.start,
        stop=part.stop,
    )


def _paths(options: dict[str, str]) -> list[str]:
    out: list[str] = []
    if options.get("paths"):
        raw = options["paths"]
        out.extend(json.loads(raw) if raw.startswith("[") else raw.split(","))
    if options.get("path"):
        out.append(options["path"])
    return out


_PUSHABLE = ("kind", "purgatory")


def _pushed(item: Filter) -> tuple[str, frozenset[str]] | None:
    """``(column, values)`` of an equality or IN filter on kind/purgatory, else None."""
    if isinstance(item, EqualTo) and isinstance(item.value, str):
        attribute, values = item.attribute, (item.value,)
    elif isinstance(item, In) and all(isinstance(v, str) for v in item.value):
        attribute, values = item.attribute, tuple(item.value)
    else:
        return None
    if len(attribute) != 1 or attribute[0] not in _PUSHABLE:
        return None
    return attribute[0], frozenset(values)


# The wall-clock columns a time range may be pushed on (bounds in ms, inclusive).
TIME_COLUMNS = ("created_wall_ms", "due_wall_ms", "applied_wall_ms", "completed_wall_ms")
_BOUNDS: dict[type[Filter], tuple[int, int]] = {
    EqualTo: (0, 0),
    GreaterThan: (1, 0),
    GreaterThanOrEqual: (0, 0),
    LessThan: (0, -1),
    LessThanOrEqual: (0, 0),
}


def _time_range(item: Filter) -> tuple[str, int | None, int | None] | None:
    """``(column, lowest, highest)`` kept by a comparison of a time column with an integer
    (or by ``IS NOT NULL`` on one: no bound)."""
    value = getattr(item, "value", None)
    shift = _BOUNDS.get(type(item))
    attribute: tuple[str, ...] = tuple(getattr(item, "attribute", ()))
    if isinstance(item, IsNotNull) and len(attribute) == 1 and attribute[0] in TIME_COLUMNS:
        return attribute[0], None, None  # what Spark adds beside every comparison
    if shift is None or not isinstance(value, int) or isinstance(value, bool):
        return None
    if len(attribute) != 1 or attribute[0] not in TIME_COLUMNS:
        return None
    low = value + shift[0] if isinstance(item, (EqualTo, GreaterThan, GreaterThanOrEqual)) else None
    high = value + shift[1] if isinstance(item, (EqualTo, LessThan, LessThanOrEqual)) else None
    return attribute[0], low, high


def _in_ranges(
    batches: Iterator[pa.RecordBatch], ranges: dict[str, tuple[int | None, int | None]]
) -> Iterator[pa.RecordBatch]:
    """Only the rows whose time columns lie in ``ranges`` (a null time is outside; a range
    with no bound is ``IS NOT NULL``)."""
    for batch in batches:
        keep = None
        for column, (low, high) in ranges.items():
            values = batch.column(column)
            valid = pc.is_valid(values)
            keep = valid if keep is None else pc.and_(keep, valid)
            for bound, compare in ((low, pc.greater_equal), (high, pc.less_equal)):
                if bound is not None:
                    test = pc.fill_null(compare(values, bound), False)
                    keep = test if keep is None else pc.and_(keep, test)
        kept = batch if keep is None else batch.filter(keep)
        if kept.num_rows:
            yield kept


class JournalReader(DataSourceReader):
    """Plans one partition per segment; ``kind``/``purgatory`` equality and IN filters are
    applied while decoding (a record of an unwanted kind is not even parsed), and
    comparisons of a time column (``TIME_COLUMNS``) with an integer before the rows leave
    the worker (every segment is still read: the journal has no index by time).

    Option ``only`` (a JSON list of segment URIs): read just those segments of the planned
    journals, each still knowing its journal's shape (last segment, next base index);
    incremental ingest uses it to skip segments it has already ingested. Option ``pieces``
    (an integer): cut each segment into up to that many partitions (:func:`split`).
    """

    def __init__(self, options: dict[str, str]) -> None:
        self.paths = _paths(options)
        self.only = json.loads(options["only"]) if options.get("only") else None
        self.pieces = int(options.get("pieces") or 1)
        self.wanted: dict[str, frozenset[str]] = {}
        self.ranges: dict[str, tuple[int | None, int | None]] = {}

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for item in filters:
            bounds = _time_range(item)
            if bounds is not None:
                column, low, high = bounds
                old_low, old_high = self.ranges.get(column, (None, None))
                lows = [b for b in (low, old_low) if b is not None]
                highs = [b for b in (high, old_high) if b is not None]
                self.ranges[column] = (max(lows, default=None), min(highs, default=None))
                continue
            pushed = _pushed(item)
            if pushed is None:
                yield item
                continue
            column, values = pushed
            self.wanted[column] = self.wanted.get(column, values) & values

    def partitions(self) -> Sequence[InputPartition]:
        parts = plan(self.paths)
        if self.only is not None:
            keep = set(self.only)
            parts = [part for part in parts if part.uri in keep]
        return split(parts, self.pieces)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, SegmentPartition):
            return  # Spark's stand-in partition when planning found none (only=[])
        rows = read_partition(partition, self.wanted.get("kind"), self.wanted.get("purgatory"))
        yield from _in_ranges(rows, self.ranges) if self.ranges else rows


class JournalDataSource(DataSource):
    """``spark.read.format("purgatory-journal").load(PATH)``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return spark_ddl()

    def reader(self, schema: Any) -> DataSourceReader:
        return JournalReader(dict(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """``spark.readStream.format("purgatory-journal")``: :mod:`.journal_stream`."""
        from purgatory_pipeline.journal_stream import JournalStreamReader  # noqa: PLC0415

        return JournalStreamReader(_paths(dict(self.options)))


def register(spark: Any) -> None:
    """Make ``format("purgatory-journal")`` (and ``purgatory-subscribe``) known to ``spark``."""
    # The reader implements pushFilters; with pushdown off, Spark refuses to read it at all.
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(JournalDataSource)
    from purgatory_pipeline.live import SubscribeDataSource  # noqa: PLC0415 - needs grpc

    spark.dataSource.register(SubscribeDataSource)
