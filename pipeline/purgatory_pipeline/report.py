"""``purgatory-pipeline report``: summaries of the ingested tables (Parquet, JSON, HTML).

Per purgatory:

- ``per_minute``: arrivals (registrations by creation minute) and outcomes by state (by
  completion minute).
- ``wait``: wait time (end - creation) p50/p90/p99/max of COMPLETED operations.
- ``lateness``: expiry lateness (``lateness_ms`` of EXPIRED outcomes: how long after its due
  time the timer fired) p50/p90/p99/p999/max: the timer-precision SLO.
- ``timeline``: the same span in at most 600 round buckets (1 s to 1 week, chosen per
  purgatory from its span: :func:`purgatory_pipeline.charts.bucket_ms`): arrivals,
  outcomes by state (by end time), the pending backlog at each bucket's end (operations
  created by then less those ended by then), wait p50/p90/p99 of the operations COMPLETED
  in it, and the late releases (expiries more than ``LATE_RELEASE_MS`` after their
  deadline) with their largest lateness. The report's time charts draw it.
- ``top_keys``: the top N keys by watches, by signals and by expirations.
- ``ack_latency``: for N-acks (``min_signals``) operations, per signal ``source``: the time
  from registration to that source's first signal on the operation's keys (counted only
  between the registration and the outcome, as the server counts progress).

Percentiles are exact (Spark's ``percentile``, linear interpolation between closest ranks,
the same as ``numpy.percentile``'s default), computed on the executors; the driver collects
only these summaries, so its memory does not grow with the data.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from purgatory_pipeline.charts import bucket_ms
from purgatory_pipeline.ingest import read_table
from purgatory_pipeline.outputs import read_text, write_text
from purgatory_pipeline.report_html import LATE_RELEASE_MS, render_html

log = logging.getLogger(__name__)

STATES = ("COMPLETED", "EXPIRED", "FORCE_COMPLETED", "CANCELLED")
WAIT_QUANTILES = (0.5, 0.9, 0.99)
LATENESS_QUANTILES = (0.5, 0.9, 0.99, 0.999)
TOP_N = 20
# summary.json keeps at most this many most recent minutes per purgatory (the Parquet
# summary keeps all of them; the HTML charts draw the timeline's buckets instead).
CHART_MINUTES = 1440


def _q(name: float) -> str:
    return "p" + f"{name * 100:g}".replace(".", "")


def percentiles(df: DataFrame, column: str, quantiles: tuple[float, ...]) -> DataFrame:
    """Per purgatory: count, each quantile of ``column`` and its max."""
    agg = df.groupBy("purgatory").agg(
        F.count(column).alias("count"),
        F.percentile(F.col(column), F.array(*[F.lit(q) for q in quantiles])).alias("q"),
        F.max(column).alias("max"),
    )
    return agg.select(
        "purgatory",
        "count",
        *[F.col("q")[i].alias(_q(q)) for i, q in enumerate(quantiles)],
        "max",
    )


def per_minute(operations: DataFrame, events: DataFrame) -> DataFrame:
    minute = F.date_trunc("minute", F.timestamp_millis(F.col("ts")))
    arrivals = (
        operations.filter(F.col("registered_index").isNotNull())
        .select("purgatory", F.col("created_wall_ms").alias("ts"))
        .groupBy("purgatory", minute.alias("minute"))
        .agg(F.count(F.lit(1)).alias("arrivals"))
    )
    outcomes = (
        events.select("purgatory", "state", F.col("completed_wall_ms").alias("ts"))
        .groupBy("purgatory", minute.alias("minute"))
        .pivot("state", list(STATES))
        .count()
    )
    joined = arrivals.join(outcomes, ["purgatory", "minute"], "full_outer")
    return joined.select(
        "purgatory",
        "minute",
        F.coalesce("arrivals", F.lit(0)).alias("arrivals"),
        *[F.coalesce(F.col(s), F.lit(0)).alias(s.lower()) for s in STATES],
    ).orderBy("purgatory", "minute")


def _bucket(column: str) -> Any:
    start = F.floor(F.col(column) / F.col("bucket_ms")) * F.col("bucket_ms")
    return F.timestamp_millis(start.cast("long")).alias("start")


def timeline(operations: DataFrame) -> DataFrame:
    """Per purgatory and time bucket (see the module): activity, backlog, wait, late releases.

    One small job first collects each purgatory's first and last time, from which its
    bucket size is chosen; the buckets themselves are aggregated on the executors.
    """
    ended = F.col("ended_wall_ms")
    spans = operations.groupBy("purgatory").agg(
        F.min("created_wall_ms").alias("first"),
        F.max(F.greatest("created_wall_ms", ended)).alias("last"),
    )
    sizes = [
        (row["purgatory"], bucket_ms(row["last"] - row["first"] + 1))
        for row in spans.collect()
        if row["first"] is not None
    ]
    spark = operations.sparkSession
    table = spark.createDataFrame(sizes, "purgatory STRING, bucket_ms BIGINT")
    ops = operations.join(F.broadcast(table), "purgatory")
    opened = (
        ops.filter(F.col("created_wall_ms").isNotNull())
        .groupBy("purgatory", "bucket_ms", _bucket("created_wall_ms"))
        .agg(
            F.count("registered_index").alias("arrivals"),
            F.count(F.lit(1)).alias("opened"),
        )
    )
    late = (F.col("state") == "EXPIRED") & (F.col("lateness_ms") > LATE_RELEASE_MS)
    completed_wait = F.when(F.col("state") == "COMPLETED", F.col("wait_ms"))
    closed = (
        ops.filter(ended.isNotNull())
        .groupBy("purgatory", "bucket_ms", _bucket("ended_wall_ms"))
        .agg(
            *[F.count(F.when(F.col("state") == s, 1)).alias(s.lower()) for s in STATES],
            F.count(F.lit(1)).alias("closed"),
            F.percentile(completed_wait, F.array(*[F.lit(q) for q in WAIT_QUANTILES])).alias("q"),
            F.count(F.when(late, 1)).alias("late_releases"),
            F.max(F.when(late, F.col("lateness_ms"))).alias("late_max_ms"),
        )
    )
    joined = opened.join(closed, ["purgatory", "bucket_ms", "start"], "full_outer")
    running = (
        Window.partitionBy("purgatory")
        .orderBy("start")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    zero = F.lit(0)
    return joined.select(
        "purgatory",
        "start",
        "bucket_ms",
        F.coalesce("arrivals", zero).alias("arrivals"),
        *[F.coalesce(s.lower(), zero).alias(s.lower()) for s in STATES],
        F.sum(F.coalesce("opened", zero) - F.coalesce("closed", zero))
        .over(running)
        .alias("pending"),
        *[F.col("q")[i].alias(f"wait_{_q(q)}_ms") for i, q in enumerate(WAIT_QUANTILES)],
        F.coalesce("late_releases", zero).alias("late_releases"),
        "late_max_ms",
    ).orderBy("purgatory", "start")


def top_keys(operations: DataFrame, signals: DataFrame, n: int = TOP_N) -> DataFrame:
    exploded = operations.select("purgatory", "state", F.explode("keys").alias("key"))
    metrics = [
        exploded.groupBy("purgatory", "key").count().withColumn("metric", F.lit("watches")),
        signals.groupBy("purgatory", "key").count().withColumn("metric", F.lit("signals")),
        exploded.filter(F.col("state") == "EXPIRED")
        .groupBy("purgatory", "key")
        .count()
        .withColumn("metric", F.lit("expirations")),
    ]
    union = metrics[0].unionByName(metrics[1]).unionByName(metrics[2])
    rank = F.row_number().over(
        Window.partitionBy("purgatory", "metric").orderBy(F.desc("count"), F.asc("key"))
    )
    return (
        union.withColumn("rank", rank)
        .filter(F.col("rank") <= n)
        .select("purgatory", "metric", "rank", "key", "count")
        .orderBy("purgatory", "metric", "rank")
    )


def ack_latency(operations: DataFrame, signals: DataFrame) -> DataFrame:
    """Per purgatory and source: latency of the source's first signal to N-acks operations."""
    ops = operations.filter(
        (F.col("condition_kind") == "min_signals") & F.col("registered_index").isNotNull()
    ).select(
        "purgatory",
        "operation_id",
        "created_wall_ms",
        "registered_index",
        "outcome_index",
        F.explode("keys").alias("key"),
    )
    sig = signals.select(
        "purgatory", "key", F.col("index").alias("signal_index"), "source", "applied_wall_ms"
    )
    in_window = (F.col("signal_index") > F.col("registered_index")) & (
        F.col("outcome_index").isNull() | (F.col("signal_index") < F.col("outcome_index"))
    )
    firsts = (
        ops.join(sig, ["purgatory", "key"])
        .filter(in_window)
        .groupBy("purgatory", "operation_id", "source")
        .agg(
            (F.min("applied_wall_ms") - F.first("created_wall_ms")).alias("latency_ms"),
        )
    )
    agg = firsts.groupBy("purgatory", "source").agg(
        F.count("latency_ms").alias("count"),
        F.percentile("latency_ms", F.array(*[F.lit(q) for q in WAIT_QUANTILES])).alias("q"),
        F.max("latency_ms").alias("max"),
    )
    return agg.select(
        "purgatory",
        "source",
        "count",
        *[F.col("q")[i].alias(_q(q)) for i, q in enumerate(WAIT_QUANTILES)],
        "max",
    ).orderBy("purgatory", "source")


def state_counts(operations: DataFrame) -> DataFrame:
    return operations.groupBy("purgatory", "state").count().orderBy("purgatory", "state")


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    """Collect a *summary* (bounded by purgatories x keys/minutes), never record-level data."""
    out = []
    for row in df.collect():
        item = row.asDict()
        for key, value in item.items():
            if hasattr(value, "isoformat"):
                item[key] = value.isoformat()
        out.append(item)
    return out


def build_summaries(spark: Any, tables: str) -> dict[str, DataFrame]:
    operations = read_table(spark, tables, "operations")
    events = read_table(spark, tables, "events")
    signals = read_table(spark, tables, "signals")
    expired = operations.filter(F.col("state") == "EXPIRED")
    return {
        "states": state_counts(operations),
        "per_minute": per_minute(operations, events),
        "timeline": timeline(operations),
        "wait": percentiles(
            operations.filter(F.col("state") == "COMPLETED"), "wait_ms", WAIT_QUANTILES
        ),
        "lateness": percentiles(expired, "lateness_ms", LATENESS_QUANTILES),
        "timer_precision": percentiles(
            expired.filter(F.col("lateness_ms") <= LATE_RELEASE_MS),
            "lateness_ms",
            LATENESS_QUANTILES,
        ),
        "late_releases": percentiles(
            expired.filter(F.col("lateness_ms") > LATE_RELEASE_MS), "lateness_ms", WAIT_QUANTILES
        ),
        "top_keys": top_keys(operations, signals),
        "ack_latency": ack_latency(operations, signals),
    }


def summarise(summaries: dict[str, DataFrame], out: str) -> dict[str, Any]:
    """Write each summary as Parquet under ``out`` and return the JSON summary."""
    by_purgatory: dict[str, dict[str, Any]] = {}

    def slot(name: str) -> dict[str, Any]:
        return by_purgatory.setdefault(
            name,
            {
                "states": {},
                "wait_ms": None,
                "lateness_ms": None,
                "top_keys": {},
                "ack_latency_ms": [],
                "per_minute": [],
                "minutes": 0,
                "timeline": {"bucket_ms": None, "buckets": []},
            },
        )

    spark: Any = next(iter(summaries.values())).sparkSession
    written = {}
    for number, (name, df) in enumerate(summaries.items(), 1):
        path = f"{out.rstrip('/')}/{name}"
        spark.sparkContext.setJobDescription(f"report: {name}")
        df.write.mode("overwrite").parquet(path)
        written[name] = spark.read.schema(df.schema).parquet(path)
        rows = written[name].count()
        plural = "" if rows == 1 else "s"
        log.info("report: %d/%d %s: %s row%s", number, len(summaries), name, f"{rows:,}", plural)
    for row in _rows(written["states"]):
        slot(row["purgatory"])["states"][row["state"]] = row["count"]
    for row in _rows(written["wait"]):
        slot(row.pop("purgatory"))["wait_ms"] = row
    for row in _rows(written["lateness"]):
        slot(row.pop("purgatory"))["lateness_ms"] = row
    for name in ("timer_precision", "late_releases"):
        for row in _rows(written[name]):
            slot(row.pop("purgatory"))[f"{name}_ms"] = row
    for row in _rows(written["top_keys"].orderBy("purgatory", "metric", "rank")):
        metric = slot(row["purgatory"])["top_keys"].setdefault(row["metric"], [])
        metric.append({"key": row["key"], "count": row["count"]})
    for row in _rows(written["ack_latency"].orderBy("purgatory", "source")):
        slot(row.pop("purgatory"))["ack_latency_ms"].append(row)
    minutes = written["per_minute"]
    span = minutes.groupBy("purgatory").agg(
        F.count(F.lit(1)).alias("count"),
        F.min("minute").alias("first"),
        F.max("minute").alias("last"),
    )
    for row in _rows(span):
        info = slot(row["purgatory"])
        info["minutes"] = row["count"]
        info["first_minute"], info["last_minute"] = row["first"], row["last"]
    recent = minutes.withColumn(
        "r", F.row_number().over(Window.partitionBy("purgatory").orderBy(F.desc("minute")))
    ).filter(F.col("r") <= CHART_MINUTES)
    for row in _rows(recent.drop("r").orderBy("purgatory", "minute")):
        slot(row.pop("purgatory"))["per_minute"].append(row)
    for row in _rows(written["timeline"].orderBy("purgatory", "start")):
        line = slot(row.pop("purgatory"))["timeline"]
        line["bucket_ms"] = row.pop("bucket_ms")
        line["buckets"].append(row)
    spark.sparkContext.setJobDescription(None)
    return {"purgatories": dict(sorted(by_purgatory.items()))}


def report(spark: Any, tables: str, out: str) -> dict[str, Any]:
    """Compute every summary from ``tables``; write Parquet, ``summary.json``, ``report.html``."""
    summary = summarise(build_summaries(spark, tables), out)
    ingested = read_text(spark, tables, "_ingest.json")
    summary["ingest"] = json.loads(ingested) if ingested else None
    write_text(spark, out, "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    write_text(spark, out, "report.html", render_html(summary))
    return summary
