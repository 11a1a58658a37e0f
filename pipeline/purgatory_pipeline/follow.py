"""``ingest --follow``: the tables kept up to date from the journal as a stream, exactly once.

A Structured Streaming query over ``readStream.format("purgatory-journal")``
(:mod:`purgatory_pipeline.journal_stream`) with Spark's checkpoint; each micro-batch goes
through ``foreachBatch``:

1. its records are written to ``_stream/batch-N`` (Spark's writer, by ``segment_key``),
   then moved into ``_records/segment_key=K/stream-N-MMMMM.parquet`` after every file of
   an earlier attempt of batch N is deleted: a batch replayed after a crash (Spark replays
   the last batch whose commit it did not log, with the same offsets, so the same records)
   replaces its files instead of adding to them;
2. the tables are rebuilt where those segments change them, as an incremental ingest
   does (:func:`purgatory_pipeline.ingest.merge`); the first batch (no tables yet) builds
   them whole (:func:`purgatory_pipeline.ingest.write_all`).

Exactly once: the tables are a function of ``_records`` alone, and ``_records`` holds each
record once whatever a crash replays. What a crash in step 2 could lose is the partitions
it had deleted and not yet written; before deleting them, their segments are noted in
``_stream_pending.json`` and the next batch rebuilds them too (the note is cleared when
the tables are written).

Stopping: ``foreachBatch`` runs in this Python process, called back from the JVM, and
Spark's ``StreamingQuery.stop()`` returns without waiting for a call in progress, which
would go on writing beside whatever runs next. :class:`Following` (what :func:`follow`
returns) stops the query and then waits for that call, which gives up at its next step
(as a killed process would: the batch is not committed, the next run replays it).

An ``out`` is either followed or ingested in batches, not both
(the batch ingest's checkpoint, ``_segments.json``, is not kept here; a batch ingest over a
followed ``out`` rebuilds everything).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline.errors import StreamError
from purgatory_pipeline.incremental import key_column
from purgatory_pipeline.ingest import RECORDS, TABLES, merge, read_records, write_all
from purgatory_pipeline.outputs import exists, read_text, write_text
from purgatory_pipeline.source import FORMAT
from purgatory_pipeline.tables import KEY

__all__ = ["PENDING", "Following", "follow"]

log = logging.getLogger(__name__)

PENDING = "_stream_pending.json"
_STAGING = "_stream"
# Every segment: the first batch, or one that failed while building the tables whole.
_ALL = "*"


def follow(
    spark: Any,
    journals: list[str],
    out: str,
    checkpoint: str,
    *,
    interval_s: float = 10.0,
    available_now: bool = False,
) -> Any:
    """Start the query (see :class:`Following`).

    ``available_now``: process what the journals hold now, then stop (a catch-up run).
    """
    stream = spark.readStream.format(FORMAT).option("paths", json.dumps(list(journals))).load()
    batches = _Batches(out)
    writer = stream.writeStream.foreachBatch(batches).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{interval_s} seconds")
    return Following(writer.queryName("purgatory-journal-follow").start(), batches)


class Following:
    """A running follow: Spark's ``StreamingQuery`` as ``query``, and a ``stop`` that waits."""

    def __init__(self, query: Any, batches: _Batches) -> None:
        self.query = query
        self._batches = batches

    def stop(self) -> None:
        """Stop the query, then wait until no batch of it is still writing."""
        self._batches.stopped.set()
        try:
            self.query.stop()
        finally:
            with self._batches.busy:
                pass

    def awaitTermination(self, timeout: float | None = None) -> Any:
        return self.query.awaitTermination(timeout)


class _Batches:
    """The ``foreachBatch`` function (driver side): see the module docstring."""

    def __init__(self, out: str) -> None:
        self.out = out.rstrip("/")
        self.busy = threading.Lock()
        self.stopped = threading.Event()

    def _check(self) -> None:
        if self.stopped.is_set():
            raise StreamError("the follow query was stopped; this batch is replayed next time")

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self.busy:
            self._check()
            self._run(batch, batch_id)

    def _run(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        keys = self._place(spark, batch, batch_id)
        self._check()
        pending = _pending(spark, self.out)
        if not pending and not keys:
            return
        records = read_records(spark, self.out).filter(F.col("kind") != "torn_tail")
        if _ALL in pending or not all(exists(spark, self.out, name) for name in TABLES):
            _note(spark, self.out, {_ALL})
            self._check()
            write_all(spark, self.out, records)
        else:
            changed = keys | pending

            def note(rebuilt: set[str]) -> None:
                self._check()
                _note(spark, self.out, rebuilt | pending)

            merge(spark, self.out, records, changed, before_drop=note)
        self._check()
        _note(spark, self.out, set())
        log.info("follow: batch %d: %d segments changed", batch_id, len(keys))

    def _place(self, spark: Any, batch: DataFrame, batch_id: int) -> set[str]:
        """Write the batch's records into ``_records``; the segment keys it wrote into."""
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        staging = jvm.org.apache.hadoop.fs.Path(f"{self.out}/{_STAGING}/batch-{batch_id}")
        filesystem = staging.getFileSystem(conf)
        filesystem.delete(staging, True)
        batch.withColumn(KEY, key_column()).write.partitionBy(KEY).parquet(str(staging))
        prefix = f"stream-{batch_id:010d}-"
        earlier = jvm.org.apache.hadoop.fs.Path(f"{self.out}/{RECORDS}/*/{prefix}*")
        for status in filesystem.globStatus(earlier) or []:
            filesystem.delete(status.getPath(), False)
        keys: set[str] = set()
        pattern = jvm.org.apache.hadoop.fs.Path(f"{staging}/{KEY}=*/part-*.parquet")
        for number, status in enumerate(filesystem.globStatus(pattern) or []):
            source = status.getPath()
            partition = source.getParent().getName()
            keys.add(partition.partition("=")[2])
            directory = jvm.org.apache.hadoop.fs.Path(f"{self.out}/{RECORDS}/{partition}")
            filesystem.mkdirs(directory)
            target = jvm.org.apache.hadoop.fs.Path(directory, f"{prefix}{number:05d}.parquet")
            if not filesystem.rename(source, target):
                raise RuntimeError(f"could not move {source} to {target}")
        filesystem.delete(staging, True)
        return keys


def _pending(spark: Any, out: str) -> set[str]:
    text = read_text(spark, out, PENDING)
    return set(json.loads(text)) if text else set()


def _note(spark: Any, out: str, keys: set[str]) -> None:
    write_text(spark, out, PENDING, json.dumps(sorted(keys)) + "\n")
