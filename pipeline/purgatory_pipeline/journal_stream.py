"""``spark.readStream.format("purgatory-journal").load(PATH)``: the journal as a stream.

Offsets are ``{journal: next_index}`` per journal under ``PATH`` (a journal directory, a
data directory: the journals found there at each trigger, new purgatories included): the
journal index after the last *complete* frame. A micro-batch ``[start, end)`` reads, per
journal, the segments holding those indices and yields exactly their records, so new
segments and the growing head segment are both read, and Spark's checkpoint (which logs
each batch's offsets before running it) replays a batch with the same records.

Why indices: a record's index is fixed by its position and never reused; recovery after a
crash drops only a torn tail, which lies after the last complete frame and so after every
offset this source ever returned. The head's frames are walked once (CRC only, from where
the last walk stopped; the driver keeps that position). An incomplete frame at the head
(a write in progress, or torn by a crash) is not an offset yet; it is never a row:
``torn_tail`` rows are left out of the stream.

Limits: a segment deleted by compaction before a batch that needs it is read (the query
stopped that long) is skipped with the batch source's WARNING; the stream then lacks its
records (``ingest --full`` over the surviving journal gives what remains).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from purgatory_pipeline.segment import HEADER_BYTES, complete_frames, segment_base
from purgatory_pipeline.source import SegmentPartition, open_uri, plan, read_partition

__all__ = ["IndexRange", "JournalStreamReader"]

log = logging.getLogger(__name__)


@dataclass
class IndexRange(InputPartition):
    """One segment and the indices ``[lo, hi)`` of it one micro-batch reads."""

    segment: SegmentPartition
    lo: int
    hi: int


def _base(part: SegmentPartition) -> int:
    return segment_base(part.uri.rsplit("/", 1)[-1]) or 0


class JournalStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans index ranges per journal segment; see the module docstring.

    ``trigger(availableNow=True)``: the offsets at the query's start are its target; a
    batch replayed from the checkpoint first, the rest up to the target after it.
    """

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        # Per head segment: (byte offset, index) after the last complete frame walked.
        self._walked: dict[str, tuple[int, int]] = {}
        self._target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        return {}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest({})

    def latestOffset(
        self, start: dict[str, int] | None = None, limit: Any = None
    ) -> dict[str, int]:
        start = dict(start or {})
        latest = self._latest(start)
        if self._target is not None:  # no further than the availableNow target
            target = self._target
            latest = {
                j: max(start.get(j, 0), min(n, target.get(j, start.get(j, 0))))
                for j, n in latest.items()
            }
        return latest

    def _latest(self, start: dict[str, int]) -> dict[str, int]:
        journals: dict[str, list[SegmentPartition]] = {}
        for part in plan(self.paths):
            journals.setdefault(part.journal, []).append(part)
        latest = dict(start)
        for journal, parts in journals.items():
            latest[journal] = max(latest.get(journal, 0), self._end(parts[-1]))
        return latest

    def _end(self, head: SegmentPartition) -> int:
        """The index after the head segment's last complete frame."""
        offset, index = self._walked.get(head.uri, (HEADER_BYTES, _base(head)))
        filesystem, path = open_uri(head.uri)
        try:
            with filesystem.open_input_file(path) as handle:
                handle.seek(offset)
                data = memoryview(handle.read())
        except FileNotFoundError:
            return index
        walked, frames = complete_frames(data)
        self._walked[head.uri] = (offset + walked, index + frames)
        return index + frames

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        ranges: list[InputPartition] = []
        for part in plan(self.paths):
            lo, hi = start.get(part.journal, 0), end.get(part.journal, 0)
            first = _base(part)
            stop = part.next_base if part.next_base is not None else hi
            if max(lo, first) < min(hi, stop):
                ranges.append(IndexRange(part, max(lo, first), min(hi, stop)))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, IndexRange)
        segment = partition.segment
        for batch in read_partition(segment):
            index = batch.column("index")
            keep = pc.and_(pc.greater_equal(index, partition.lo), pc.less(index, partition.hi))
            kept = batch.filter(pc.fill_null(keep, False))
            if kept.num_rows:
                yield kept

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the journal is the server's, and offsets are Spark's to keep."""
