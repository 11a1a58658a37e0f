"""``purgatory-pipeline watch``: per-minute aggregates of a live purgatory, kept up to date.

A Structured Streaming query over :mod:`purgatory_pipeline.live`: outcomes grouped by
completion minute (UTC) and state, with the count and wait-time p50/p99/max. Each
micro-batch rewrites the aggregate table (``complete`` output mode), so the Parquet under
``--out`` (or the console) always holds the current numbers. Offsets and the aggregation
state live in ``--checkpoint``: a restarted ``watch`` resumes after the last sequence it
processed, neither losing nor counting an outcome twice.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline.live import FORMAT

log = logging.getLogger(__name__)


def live_events(spark: Any, target: str, purgatory: str, **options: str) -> DataFrame:
    reader = spark.readStream.format(FORMAT).option("target", target)
    reader = reader.option("purgatory", purgatory)
    for key, value in options.items():
        reader = reader.option(key, value)
    events: DataFrame = reader.load()
    return events


def per_minute_live(events: DataFrame) -> DataFrame:
    minute = F.date_trunc("minute", F.timestamp_millis(F.col("complete_time_ms")))
    return (
        events.groupBy("purgatory", minute.alias("minute"), "state")
        .agg(
            F.count(F.lit(1)).alias("outcomes"),
            F.percentile_approx("wait_ms", F.array(F.lit(0.5), F.lit(0.99)), 10000).alias("wait_q"),
            F.max("wait_ms").alias("wait_max_ms"),
            F.max("sequence").alias("last_sequence"),
        )
        .select(
            "purgatory",
            "minute",
            "state",
            "outcomes",
            F.col("wait_q")[0].alias("wait_p50_ms"),
            F.col("wait_q")[1].alias("wait_p99_ms"),
            "wait_max_ms",
            "last_sequence",
        )
    )


def start_watch(
    spark: Any,
    target: str,
    purgatory: str,
    *,
    out: str | None,
    checkpoint: str,
    interval_s: float = 10.0,
    options: dict[str, str] | None = None,
) -> Any:
    """Start the query; returns the ``StreamingQuery`` (the caller stops it)."""
    aggregates = per_minute_live(live_events(spark, target, purgatory, **(options or {})))
    writer = aggregates.writeStream.outputMode("complete").option("checkpointLocation", checkpoint)
    writer = writer.trigger(processingTime=f"{interval_s} seconds")
    if out is None:
        return writer.format("console").option("truncate", "false").start()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        ordered = batch.orderBy("purgatory", "minute", "state").coalesce(1)
        ordered.write.mode("overwrite").parquet(out)
        log.info("watch: batch %d written to %s", batch_id, out)

    return writer.foreachBatch(write_batch).start()


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
) -> None:
    """Run until stopped (Ctrl-C), or for ``for_seconds``."""
    query = start_watch(
        spark,
        target,
        purgatory,
        out=out,
        checkpoint=checkpoint,
        interval_s=interval_s,
        options=options,
    )
    deadline = None if for_seconds is None else time.monotonic() + for_seconds
    try:
        while query.isActive and (deadline is None or time.monotonic() < deadline):
            query.awaitTermination(1)
    except KeyboardInterrupt:
        log.info("watch: stopping")
    finally:
        query.stop()
    error = query.exception()
    if error is not None:
        raise error
