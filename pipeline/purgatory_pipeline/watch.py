"""``purgatory-pipeline watch``: per-minute aggregates of a live purgatory, kept up to date.

A Structured Streaming query over :mod:`purgatory_pipeline.live`: outcomes grouped by
completion minute (UTC) and state, with the count and wait-time p50/p99/max.

- **Bounded state**: the minute is an event-time window under a watermark (``watermark``,
  default 10 minutes behind the latest completion seen), so the state of a minute is
  dropped once no outcome can still fall into it. An outcome completed more than the
  watermark before the newest one already read is left out of the aggregates (Spark's
  rule for late data); outcomes arrive in sequence order, which is completion order, so
  only a clock step on the server makes one that late.
- **Output** (``update`` mode): each micro-batch carries the new values of the minutes it
  changed; they replace those rows of ``--out``'s table, which is rewritten into
  ``--out/_staging-BATCH`` and then moved onto ``--out/aggregates.parquet`` in one rename
  (:func:`purgatory_pipeline.outputs.publish_file`): a reader sees the previous table or
  the new one, never an empty or half-written directory. Without ``--out`` the changed
  rows are printed.
- **Interval**: the aggregation's state lives in ``state_partitions`` (default 2) state
  stores, not ``spark.sql.shuffle.partitions`` (200 by default), whose per-store cost each
  micro-batch pays and which made a batch take longer than a 5 s interval.

Offsets and state live in ``--checkpoint``: a restarted ``watch`` resumes after the last
sequence it processed, neither losing nor counting an outcome twice (the merge by
``(purgatory, minute, state)`` makes a re-run batch harmless).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline.live import FORMAT
from purgatory_pipeline.outputs import exists, publish_file

log = logging.getLogger(__name__)

WATERMARK = "10 minutes"
TABLE_FILE = "aggregates.parquet"
KEY = ("purgatory", "minute", "state")


def live_events(spark: Any, target: str, purgatory: str, **options: str) -> DataFrame:
    reader = spark.readStream.format(FORMAT).option("target", target)
    reader = reader.option("purgatory", purgatory)
    for key, value in options.items():
        reader = reader.option(key, value)
    events: DataFrame = reader.load()
    return events


def per_minute_live(events: DataFrame, watermark: str = WATERMARK) -> DataFrame:
    completed = events.withColumn("completed_at", F.timestamp_millis(F.col("complete_time_ms")))
    return (
        completed.withWatermark("completed_at", watermark)
        .groupBy("purgatory", F.window("completed_at", "1 minute").alias("w"), "state")
        .agg(
            F.count(F.lit(1)).alias("outcomes"),
            F.percentile_approx("wait_ms", F.array(F.lit(0.5), F.lit(0.99)), 10000).alias("wait_q"),
            F.max("wait_ms").alias("wait_max_ms"),
            F.max("sequence").alias("last_sequence"),
        )
        .select(
            "purgatory",
            F.col("w.start").alias("minute"),
            "state",
            "outcomes",
            F.col("wait_q")[0].alias("wait_p50_ms"),
            F.col("wait_q")[1].alias("wait_p99_ms"),
            "wait_max_ms",
            "last_sequence",
        )
    )


def read_aggregates(spark: Any, out: str) -> DataFrame:
    """What ``watch --out OUT`` published last."""
    table: DataFrame = spark.read.parquet(out.rstrip("/") + "/" + TABLE_FILE)
    return table


def merge_batch(out: str) -> Any:
    """The ``foreachBatch`` function: the batch's rows replace theirs in ``out``'s table."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        published = exists(spark, out, TABLE_FILE)
        if published and batch.isEmpty():
            return
        merged = batch
        if published:
            current = spark.read.schema(batch.schema).parquet(out.rstrip("/") + "/" + TABLE_FILE)
            merged = current.join(batch.select(*KEY), list(KEY), "left_anti").unionByName(batch)
        staging = f"{out.rstrip('/')}/_staging-{batch_id}"
        merged.orderBy(*KEY).coalesce(1).write.mode("overwrite").parquet(staging)
        publish_file(spark, staging, out, TABLE_FILE)
        log.debug("watch: batch %d published to %s/%s", batch_id, out, TABLE_FILE)

    return write_batch


def start_watch(
    spark: Any,
    target: str,
    purgatory: str,
    *,
    out: str | None,
    checkpoint: str,
    interval_s: float = 10.0,
    options: dict[str, str] | None = None,
    watermark: str = WATERMARK,
    state_partitions: int = 2,
) -> Any:
    """Start the query; returns the ``StreamingQuery`` (the caller stops it)."""
    aggregates = per_minute_live(
        live_events(spark, target, purgatory, **(options or {})), watermark
    )
    writer = aggregates.writeStream.outputMode("update").option("checkpointLocation", checkpoint)
    writer = writer.trigger(processingTime=f"{interval_s} seconds")
    writer = writer.queryName(f"purgatory-watch-{purgatory}")
    if out is None:
        writer = writer.format("console").option("truncate", "false")
    else:
        writer = writer.foreachBatch(merge_batch(out))
    # The query takes the session's settings when it starts (a restart from a checkpoint
    # keeps the partition count the checkpoint was made with).
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(state_partitions))
    try:
        return writer.start()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


class ProgressLines:
    """The console's lines for a query's progress: one for each micro-batch that read
    outcomes, and a warning for each batch that took longer than the interval.

    :meth:`news` reads the query's recent progress updates, all of them: two batches can
    end between two polls (the no-data batch that follows a batch which moved the
    watermark), and the last update alone would hide the first. It reads them only when
    the last update is new: Spark converts each of the (up to 100) kept updates on every
    read, a cost an idle poll need not pay. :meth:`report` tells each batch once, however
    many reads hold it. Not thread-safe: one polling loop calls both.
    """

    def __init__(self, interval_s: float, out: str | None) -> None:
        self._interval_s = interval_s
        self._out = out
        self._reported = -1
        self._warned = -1
        self._last: tuple[Any, ...] | None = None

    def news(self, query: Any) -> list[dict[str, Any]]:
        """The query's kept progress updates if one came since the last call, else none."""
        last = query.lastProgress
        if last is None:
            return []
        seen = (last.get("runId"), last.get("batchId"), last.get("timestamp"))
        if seen == self._last:
            return []
        self._last = seen
        updates: list[dict[str, Any]] = query.recentProgress
        return updates

    def report(self, updates: list[dict[str, Any]]) -> None:
        for progress in updates:
            batch = progress.get("batchId", -1)
            rows = progress.get("numInputRows", 0)
            if batch > self._reported and rows:
                self._reported = batch
                updated = sum(
                    op.get("numRowsUpdated", 0) for op in progress.get("stateOperators", [])
                )
                log.info(
                    "watch: batch %d: %s outcomes, %s minute rows updated%s",
                    batch,
                    f"{rows:,}",
                    f"{updated:,}",
                    f" in {self._out}/{TABLE_FILE}" if self._out else "",
                )
            took = progress.get("durationMs", {}).get("triggerExecution", 0)
            if took > self._interval_s * 1000 and batch > self._warned:
                self._warned = batch
                log.warning(
                    "watch: batch %d took %d ms, longer than --interval %g s",
                    batch,
                    took,
                    self._interval_s,
                )


def watch(
    spark: Any,
    target: str,
    purgatory: str,
    *,
    out: str | None,
    checkpoint: str,
    interval_s: float = 10.0,
    for_seconds: float | None = None,
    options: dict[str, str] | None = None,
    watermark: str = WATERMARK,
    stop: threading.Event | None = None,
) -> None:
    """Run until stopped (Ctrl-C, or ``stop`` set: the query stops between two polls of
    at most a second), or for ``for_seconds``."""
    query = start_watch(
        spark,
        target,
        purgatory,
        out=out,
        checkpoint=checkpoint,
        interval_s=interval_s,
        options=options,
        watermark=watermark,
    )
    deadline = None if for_seconds is None else time.monotonic() + for_seconds
    console = ProgressLines(interval_s, out)
    try:
        while query.isActive and (deadline is None or time.monotonic() < deadline):
            query.awaitTermination(1)
            updates = console.news(query)
            if stop is not None and stop.is_set():
                break  # before any more progress lines: Ctrl-C's line is the last
            console.report(updates)
    except KeyboardInterrupt:
        log.info("watch: stopping")
    finally:
        query.stop()
    error = query.exception()
    if error is not None:
        raise error
