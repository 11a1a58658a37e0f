"""The journal source and ingest against a journal the real server wrote (one restart).

Expected values come from tests/pipeline/oracle.py: plain Python over the records as the
server's own recovery reads them, not over anything the pipeline computed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pyspark.sql import functions as F

from tests.pipeline import oracle, workload
from tests.pipeline.conftest import Workload


def test_record_counts_match_the_servers_reading(spark: Any, work: Workload) -> None:
    expected = Counter(r.WhichOneof("record") for _, r in work.oracle.records)
    assert work.ingest_summary.records == dict(expected)
    assert expected["registered"] == 5 + 1 + 4 + 1 + 1 + 1 + 4 + 2 + 2
    indexes = [
        row["index"]
        for row in spark.read.format("purgatory-journal")
        .load(str(work.journal_dir))
        .filter(F.col("kind") != "torn_tail")
        .select("index")
        .collect()
    ]
    assert sorted(indexes) == [i for i, _ in work.oracle.records]


def test_a_time_range_is_applied_in_the_source(spark: Any, work: Workload) -> None:
    """Comparisons of a time column with an integer are pushed: no Filter is left for Spark."""
    times = sorted(r.signal.applied_wall_ms for _, r in work.oracle.records if r.HasField("signal"))
    low, high = times[len(times) // 4], times[3 * len(times) // 4]
    records = spark.read.format("purgatory-journal").load(str(work.journal_dir))
    window = records.filter((F.col("applied_wall_ms") >= low) & (F.col("applied_wall_ms") < high))
    plan = window._jdf.queryExecution().optimizedPlan().toString()
    assert "Filter" not in plan, plan
    got = sorted(row["applied_wall_ms"] for row in window.select("applied_wall_ms").collect())
    assert got == [t for t in times if low <= t < high] != []
    ended = [r.outcome.completed_wall_ms for _, r in work.oracle.records if r.HasField("outcome")]
    assert records.filter(F.col("completed_wall_ms") > ended[0]).count() == sum(
        1 for t in ended if t > ended[0]
    )


def test_torn_tail_is_skipped_and_counted_as_recovery_does(work: Workload) -> None:
    assert work.oracle.truncated_bytes == workload.TORN_BYTES
    assert work.ingest_summary.torn_tails == 1
    assert work.ingest_summary.torn_bytes == work.oracle.truncated_bytes


def test_operations_per_state(spark: Any, work: Workload) -> None:
    expected = Counter(op["state"] for op in oracle.operations(work.oracle.records).values())
    assert expected == {"COMPLETED": 13, "FORCE_COMPLETED": 1, "EXPIRED": 6, "WATCHING": 1}
    table = spark.read.parquet(str(work.tables / "operations"))
    got = {r["state"]: r["count"] for r in table.groupBy("state").count().collect()}
    assert got == dict(expected)
    assert table.count() == table.select("purgatory", "operation_id").distinct().count()
    assert {r["purgatory"] for r in table.select("purgatory").distinct().collect()} == {"d"}


def test_rescheduled_operations_take_their_latest_deadline(spark: Any, work: Workload) -> None:
    expected = oracle.operations(work.oracle.records)
    table = spark.read.parquet(str(work.tables / "operations"))
    got = {
        r["operation_id"]: r
        for r in table.select(
            "operation_id", "due_wall_ms", "registered_due_wall_ms", "rescheduled"
        ).collect()
    }
    assert {
        op_id: (r["due_wall_ms"], r["registered_due_wall_ms"], r["rescheduled"])
        for op_id, r in got.items()
    } == {
        op_id: (op["due"], op["registered_due"], op["rescheduled"])
        for op_id, op in expected.items()
    }
    # The workload's own numbers: the last move wins, the registration's deadline is kept.
    for op_id, by_ms in workload.RESCHEDULED_BY_MS.items():
        assert got[op_id]["due_wall_ms"] == expected[op_id]["created"] + by_ms, op_id
    assert got["any-after"]["rescheduled"] == 1
    assert got["pending-0"]["rescheduled"] == 2  # the debounced re-send, then Reschedule
    pending = expected["pending-0"]
    assert got["pending-0"]["registered_due_wall_ms"] == pending["created"] + 600_000
    assert sum(r["rescheduled"] for r in got.values()) == 3
    records = spark.read.format("purgatory-journal").load(str(work.journal_dir))
    moved = records.filter(F.col("kind") == "rescheduled")
    rows = [
        (r["index"], r["purgatory"], r["operation_id"], r["due_wall_ms"])
        for r in moved.select("index", "purgatory", "operation_id", "due_wall_ms").collect()
    ]
    assert sorted(rows) == [
        (i, r.rescheduled.purgatory, r.rescheduled.operation_id, r.rescheduled.due_wall_ms)
        for i, r in work.oracle.records
        if r.WhichOneof("record") == "rescheduled"
    ]
    debounced = records.filter(
        (F.col("kind") == "registered") & (F.col("operation_id") == "pending-0")
    ).collect()
    assert [(r["extend_on_resend"], r["max_extend_ms"]) for r in debounced] == [(True, 0)]


def test_signals_and_events_tables(spark: Any, work: Workload) -> None:
    records = work.oracle.records
    signals = spark.read.parquet(str(work.tables / "signals"))
    assert signals.count() == len(oracle.signals(records))
    sources = Counter(s.source for _, s in oracle.signals(records))
    got = {r["source"]: r["count"] for r in signals.groupBy("source").count().collect()}
    assert got == dict(sources)
    events = spark.read.parquet(str(work.tables / "events"))
    sequences = sorted(r["sequence"] for r in events.select("sequence").collect())
    assert sequences == list(range(1, 21))


def test_wait_time_percentiles(reported: Workload) -> None:
    ops = oracle.operations(reported.oracle.records).values()
    waits = [op["ended"] - op["created"] for op in ops if op["state"] == "COMPLETED"]
    got = reported.report["purgatories"]["d"]["wait_ms"]  # type: ignore[index]
    assert got["count"] == len(waits) == 13
    for q, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
        assert got[name] == oracle.percentile(waits, q)
    assert got["max"] == max(waits)


def test_expiry_lateness_within_the_tick_and_after_restart(reported: Workload) -> None:
    ops = oracle.operations(reported.oracle.records)
    lateness = [op["lateness"] for op in ops.values() if op["state"] == "EXPIRED"]
    got = reported.report["purgatories"]["d"]["lateness_ms"]  # type: ignore[index]
    assert got["count"] == 6
    for q, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")):
        assert got[name] == oracle.percentile(lateness, q)
    assert got["max"] == max(lateness)
    # Expired while the server ran: within the 1 ms tick plus scheduling on a loaded
    # 2-core machine (tolerant bound). Expired at restart: at least the downtime late.
    running = [ops[f"exp-{i}"]["lateness"] for i in range(4)]
    assert all(0 <= late < 250 for late in running), running
    restart = [ops[f"late-{i}"]["lateness"] for i in range(2)]
    assert all(late >= workload.DOWNTIME_S * 1000 - 900 for late in restart), restart


def test_hot_key_ranking(reported: Workload) -> None:
    records = reported.oracle.records
    ops = oracle.operations(records)
    watches = Counter(k for op in ops.values() for k in op["keys"])
    signals = Counter(s.key for _, s in oracle.signals(records))
    expirations = Counter(k for op in ops.values() if op["state"] == "EXPIRED" for k in op["keys"])
    got = reported.report["purgatories"]["d"]["top_keys"]  # type: ignore[index]
    for metric, counter in (
        ("watches", watches),
        ("signals", signals),
        ("expirations", expirations),
    ):
        assert [(e["key"], e["count"]) for e in got[metric]] == oracle.top(counter), metric
    assert got["watches"][0] == {"key": "hot", "count": 6}
    assert got["expirations"][0]["key"] == "cold"


def test_ack_latency_per_source(reported: Workload) -> None:
    expected = oracle.ack_latencies(reported.oracle.records)
    assert sorted(expected) == ["r1", "r2", "r3"]
    got = {a["source"]: a for a in reported.report["purgatories"]["d"]["ack_latency_ms"]}  # type: ignore[index]
    assert sorted(got) == sorted(expected)
    for source, values in expected.items():
        assert got[source]["count"] == len(values)
        assert got[source]["p50"] == oracle.percentile(values, 0.5)
        assert got[source]["p99"] == oracle.percentile(values, 0.99)
        assert got[source]["max"] == max(values)


def test_per_minute_totals(reported: Workload) -> None:
    minutes = reported.report["purgatories"]["d"]["per_minute"]  # type: ignore[index]
    ops = oracle.operations(reported.oracle.records).values()
    assert sum(m["arrivals"] for m in minutes) == len(ops)
    states = Counter(op["state"] for op in ops)
    assert sum(m["completed"] for m in minutes) == states["COMPLETED"]
    assert sum(m["expired"] for m in minutes) == states["EXPIRED"]
    assert sum(m["force_completed"] for m in minutes) == states["FORCE_COMPLETED"]
    assert (reported.report_dir / "per_minute").is_dir()  # type: ignore[operator]
    assert (reported.report_dir / "summary.json").is_file()  # type: ignore[operator]


def _snapshot(spark: Any, path: str) -> list[tuple[Any, ...]]:
    df = spark.read.parquet(path)
    return sorted(tuple(map(str, row)) for row in df.collect())


def test_ingest_is_idempotent(spark: Any, work: Workload) -> None:
    from purgatory_pipeline.ingest import ingest

    before = {
        t: _snapshot(spark, str(work.tables / t)) for t in ("operations", "signals", "events")
    }
    files_before = sorted(p.relative_to(work.tables).parent for p in work.tables.rglob("*.parquet"))
    # The data directory and the journal inside it: overlapping paths count once.
    again = ingest(spark, [str(work.data_dir), str(work.journal_dir)], str(work.tables))
    assert again.records == work.ingest_summary.records
    assert again.torn_tails == 1
    after = {t: _snapshot(spark, str(work.tables / t)) for t in ("operations", "signals", "events")}
    assert after == before
    files_after = sorted(p.relative_to(work.tables).parent for p in work.tables.rglob("*.parquet"))
    assert files_after == files_before
