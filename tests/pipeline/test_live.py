"""The Structured Streaming source over a live server's Subscribe stream.

- A durable purgatory: the server restarts while the query runs, and later the query
  itself restarts from its checkpoint; every outcome arrives exactly once, in order.
- An in-memory purgatory: a server restart re-creates it with a new stream incarnation;
  the query reports it (on_reset=fail) or continues with the new stream (on_reset=restart).
- ``purgatory-pipeline watch`` in a subprocess: its console holds only the pipeline's lines
  (Spark's and py4j's go to the log file), and Ctrl-C ends it with one line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException

from tests.pipeline.cli_process import OUR_LINE, SPARK_MARKS, CliProcess
from tests.pipeline.servers import NAME, Client, Server

TRIGGER = "300 milliseconds"


def _complete(target: str, prefix: str, n: int, expect_last: int) -> None:
    client = Client(target)
    try:
        for i in range(n):
            client.watch(f"{prefix}-{i}", [f"{prefix}-key"], 60_000)
        client.signal(f"{prefix}-key", source="r1")
        client.wait_last_sequence(expect_last)
    finally:
        client.close()


def _query(spark: Any, target: str, out: Path, checkpoint: Path, **options: str) -> Any:
    reader = spark.readStream.format("purgatory-subscribe").option("target", target)
    reader = reader.option("purgatory", NAME).option("connect_timeout_s", "60")
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(out))
        .trigger(processingTime=TRIGGER)
        .start()
    )


def _sequences_by_file(out: Path) -> list[list[int]]:
    return [pq.read_table(f).column("sequence").to_pylist() for f in sorted(out.glob("*.parquet"))]


def test_durable_restart_loses_and_repeats_nothing(spark: Any, tmp_path: Path) -> None:
    server = Server(tmp_path / "data", durable=True).start()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    try:
        _complete(server.target, "a", 5, 5)
        query = _query(spark, server.target, out, checkpoint)
        try:
            query.processAllAvailable()
            server.restart()  # same port; the query keeps running across the restart
            _complete(server.target, "b", 4, 9)
            query.processAllAvailable()
        finally:
            query.stop()
        _complete(server.target, "c", 3, 12)  # while no query runs
        query = _query(spark, server.target, out, checkpoint)  # resumes from the checkpoint
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        incarnation = Client(server.target).info().incarnation
    finally:
        server.stop()
    files = [seqs for seqs in _sequences_by_file(out) if seqs]
    for seqs in files:
        assert seqs == sorted(seqs), "outcomes out of order within a micro-batch"
    everything = sorted(s for seqs in files for s in seqs)
    assert everything == list(range(1, 13))  # none lost, none repeated
    rows = spark.read.parquet(str(out))
    assert {r["incarnation"] for r in rows.select("incarnation").distinct().collect()} == {
        incarnation
    }
    assert rows.filter("state = 'COMPLETED'").count() == 12


def test_a_read_cut_off_by_a_server_kill_resumes_where_it_stopped(tmp_path: Path) -> None:
    # The worker side of a micro-batch, driven by hand so the kill lands mid-read: the batch
    # (0, 9] is read while only 1..5 exist, the server is killed and restarted, 6..9 come.
    from purgatory_pipeline.live import SequenceRange, Settings, read_range

    server = Server(tmp_path / "data", durable=True).start()
    try:
        _complete(server.target, "a", 5, 5)
        settings = Settings.from_options(
            {"target": server.target, "purgatory": NAME, "connect_timeout_s": "60"}
        )
        incarnation = Client(server.target).info().incarnation
        rows = read_range(SequenceRange(settings, incarnation, 0, 9))
        first = [next(rows)[2] for _ in range(5)]
        server.kill()
        server.start()
        _complete(server.target, "b", 4, 9)
        rest = [row[2] for row in rows]
    finally:
        server.stop()
    assert first + rest == list(range(1, 10))  # none lost, none repeated, in order


def test_in_memory_restart_is_reported(spark: Any, tmp_path: Path) -> None:
    server = Server(tmp_path / "mem", durable=False).start()
    try:
        _complete(server.target, "a", 3, 3)
        before = Client(server.target).info().incarnation
        failing = _query(spark, server.target, tmp_path / "o1", tmp_path / "c1")
        going_on = _query(
            spark, server.target, tmp_path / "o2", tmp_path / "c2", on_reset="restart"
        )
        try:
            failing.processAllAvailable()
            going_on.processAllAvailable()
            server.restart()
            after = Client(server.target).info().incarnation
            assert after != before
            _complete(server.target, "b", 2, 2)  # the new stream starts again at 1
            going_on.processAllAvailable()
            with pytest.raises(StreamingQueryException) as caught:
                failing.processAllAvailable()
            message = str(caught.value)
            assert "StreamResetError" in message
            assert before in message and after in message
        finally:
            failing.stop()
            going_on.stop()
    finally:
        server.stop()
    rows = spark.read.parquet(str(tmp_path / "o2")).collect()
    seen = sorted((r["incarnation"], r["sequence"]) for r in rows)
    assert seen == sorted([(before, 1), (before, 2), (before, 3), (after, 1), (after, 2)])


def test_watch_keeps_per_minute_aggregates(spark: Any, tmp_path: Path) -> None:
    from purgatory_pipeline.watch import ProgressLines, read_aggregates, start_watch

    server = Server(tmp_path / "data", durable=False).start()
    out = tmp_path / "agg"
    try:
        _complete(server.target, "a", 4, 4)
        query = start_watch(
            spark,
            server.target,
            NAME,
            out=str(out),
            checkpoint=str(tmp_path / "ck"),
            interval_s=0.3,
        )
        try:
            query.processAllAvailable()
            # The console reads the kept updates when the last one is new, and only then.
            console = ProgressLines(0.3, str(out))
            assert any(p["numInputRows"] == 4 for p in console.news(query))
            assert any(console.news(query) == [] for _ in range(50))
            # Published by one rename: the table file, and no Spark scratch left beside it.
            assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
                "aggregates.parquet"
            ]
            _complete(server.target, "b", 3, 7)
            query.processAllAvailable()
            progress = query.lastProgress
        finally:
            query.stop()
    finally:
        server.stop()
    # The state is bounded by a watermark on the completion time.
    assert progress["eventTime"]["watermark"] > "2000"
    assert progress["stateOperators"][0]["numShufflePartitions"] == 2
    assert not list(out.glob("_staging*"))
    rows = read_aggregates(spark, str(out)).collect()
    assert sum(r["outcomes"] for r in rows) == 7
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert max(r["last_sequence"] for r in rows) == 7


def _watch_after_four(target: str, tmp_path: Path, interval: str) -> CliProcess:
    """``purgatory-pipeline watch --out tmp_path/agg`` started after four outcomes."""
    _complete(target, "a", 4, 4)
    args = ["watch", "--target", target, "--purgatory", NAME, "--interval", interval]
    args += ["--checkpoint", str(tmp_path / "ck"), "--out", str(tmp_path / "agg")]
    return CliProcess(args)


def test_watch_console_is_quiet_and_ctrl_c_is_one_line(tmp_path: Path) -> None:
    # `purgatory-pipeline watch` as a user runs it: its console, then Ctrl-C (SIGINT).
    server = Server(tmp_path / "data", durable=False).start()
    out = tmp_path / "agg"
    try:
        run = _watch_after_four(server.target, tmp_path, "0.5")
        line = run.wait_for("watch: batch 0: ")
        assert "4 outcomes" in line and str(out / "aggregates.parquet") in line, line
        run.interrupt()
        status, after, _ = run.finish()
    finally:
        server.stop()
    assert status == 130, run.lines
    # One line for the Ctrl-C, the last; before it only what the loop had already printed
    # for the batches (a loaded host's "batch N took N ms, longer than --interval" warning).
    *before, last = after
    assert last.endswith("watch: interrupted (Ctrl-C): stopping"), after
    assert all(re.search(r"watch: batch \d+ ", line) for line in before), after
    console = run.lines
    assert all(OUR_LINE.match(line) for line in console), console
    assert not [line for line in console if any(mark in line for mark in SPARK_MARKS)]
    assert console[0].endswith(f"watch: Spark's log: {out / '_logs' / 'spark-watch.log'}")
    assert (out / "aggregates.parquet").is_file()


BATCH_LINE = re.compile(r"watch: batch (\d+): ([\d,]+) outcomes")


def _reported_outcomes(run: CliProcess, total: int) -> list[int]:
    """Batch ids of the console's batch lines, read until they account for ``total``."""
    batches: list[int] = []
    counted = 0
    while counted < total:
        match = BATCH_LINE.search(run.wait_for("watch: batch "))
        if match:
            batches.append(int(match[1]))
            counted += int(match[2].replace(",", ""))
    assert counted == total, run.lines
    return batches


def test_watch_reports_every_batch_that_read_outcomes(tmp_path: Path) -> None:
    # A short interval: the no-data batch that follows a batch which moved the watermark
    # ends well within the console's one-second poll, and its progress replaces the
    # batch that read the outcomes as the query's last. Every batch must still be told.
    server = Server(tmp_path / "data", durable=False).start()
    try:
        run = _watch_after_four(server.target, tmp_path, "0.1")
        first = _reported_outcomes(run, 4)
        _complete(server.target, "b", 3, 7)
        second = _reported_outcomes(run, 3)
        _complete(server.target, "c", 2, 9)
        third = _reported_outcomes(run, 2)
        run.interrupt()
        status, _, _ = run.finish()
    finally:
        server.stop()
    assert status == 130, run.lines
    assert first[0] == 0, run.lines
    batches = first + second + third
    assert batches == sorted(set(batches)), run.lines
