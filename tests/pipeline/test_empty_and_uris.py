"""``make pipeline``'s two commands on journals with no signals, and outputs given as URIs.

- A fresh durable purgatory (its journal is one header-only segment): ingest writes the
  three tables empty, with their schemas; report works on them.
- A timer-only purgatory (registrations and expiries, not one signal): report works.
- ``--out file:///...``: the Parquet, ``summary.json`` and ``report.html`` all land under
  that URI, and the printed path exists.
- A corrupt segment mid-journal: one line naming the file and offset, no Java stack.
- A command run on its own stops the session it started: its Spark event log is whole.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from purgatory_pipeline import cli
from purgatory_pipeline.ingest import read_table
from purgatory_server._journal.framing import encode_header

from tests.pipeline.cli_process import OUR_LINE, SPARK_MARKS, CliProcess
from tests.pipeline.servers import Client, Server

TABLE_COLUMNS = {
    "signals": {"purgatory", "date", "index", "key", "source", "applied_wall_ms"},
    "events": {"purgatory", "date", "sequence", "operation_id", "state", "lateness_ms"},
    "operations": {"purgatory", "date", "operation_id", "state", "wait_ms", "due_wall_ms"},
}


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two data directories the real server wrote: a fresh one and a timer-only one."""
    root = tmp_path_factory.mktemp("no-signals")
    fresh = Server(root / "fresh", durable=True).start()
    fresh.stop()
    timers = Server(root / "timers", durable=True).start()
    client = Client(timers.target)
    try:
        for i in range(3):
            client.watch(f"t-{i}", [f"k{i}"], 50)
        client.wait_last_sequence(3)
    finally:
        client.close()
        timers.stop()
    return {"fresh": root / "fresh", "timers": root / "timers"}


def _pipeline(spark: Any, data: Path, tables: str, report: str) -> list[str]:
    """``make pipeline``: ingest then report, through the CLI, in this session."""
    assert cli.main(["ingest", "--journal", str(data), "--out", tables]) == 0
    assert cli.main(["report", "--tables", tables, "--out", report]) == 0
    return []


def test_fresh_durable_purgatory_gives_empty_tables_with_schemas(
    spark: Any, journals: dict[str, Path], tmp_path: Path
) -> None:
    [segment] = (journals["fresh"] / "d" / "journal").glob("*.seg")
    assert segment.stat().st_size == 24  # header only
    tables, out = tmp_path / "tables", tmp_path / "report"
    _pipeline(spark, journals["fresh"], str(tables), str(out))
    for name, columns in TABLE_COLUMNS.items():
        table = read_table(spark, str(tables), name)
        assert columns <= set(table.columns), name
        assert table.count() == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["purgatories"] == {}
    assert "No purgatory" in (out / "report.html").read_text()


def test_timer_only_purgatory_reports(
    spark: Any, journals: dict[str, Path], tmp_path: Path
) -> None:
    tables, out = tmp_path / "tables", tmp_path / "report"
    _pipeline(spark, journals["timers"], str(tables), str(out))
    summary = json.loads((out / "summary.json").read_text())
    info = summary["purgatories"]["d"]
    assert info["states"] == {"EXPIRED": 3}
    assert info["lateness_ms"]["count"] == 3
    assert info["top_keys"].get("signals", []) == []
    assert info["ack_latency_ms"] == []


def test_file_uri_output_holds_every_file(
    spark: Any,
    journals: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tables, out = tmp_path / "tables", tmp_path / "report"
    assert cli.main(["ingest", "--journal", str(journals["timers"]), "--out", tables.as_uri()]) == 0
    assert (tables / "_ingest.json").is_file()
    capsys.readouterr()
    assert cli.main(["report", "--tables", tables.as_uri(), "--out", out.as_uri()]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert (out / "report.html").is_file()
    assert (out / "summary.json").is_file()
    assert (out / "states").is_dir()
    assert not any(Path.cwd().glob("file:*")), "wrote under ./file:/ instead of the URI"
    shown = printed.rsplit(" ", 1)[-1]
    assert Path(shown.removeprefix("file:")).resolve() == (out / "report.html").resolve()


def test_unsupported_scheme_is_one_line(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="purgatory_pipeline"):
        status = cli.main(
            ["ingest", "--journal", "nosuchfs://bucket/journal", "--out", str(tmp_path / "t")]
        )
    assert status == 2
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    message = record.getMessage()
    assert "nosuchfs" in message and "\n" not in message
    assert "ArrowInvalid" not in message


_DAEMON_NOTICES = (
    r"PySpark daemon failed to flush the output to the worker process:\n"
    r"Traceback \(most recent call last\):\n(?:[ \t].*\n)*\S.*\n",
    # A traceback that starts in PySpark's daemon, stays inside PySpark, and ends with the
    # socket the JVM closed (broken pipe, or reset by peer when it was reading).
    r"Traceback \(most recent call last\):\n"
    r"  File \"[^\"\n]*pyspark/daemon\.py\", line \d+, in \w+\n(?:    .*\n)*"
    r"(?:  File \"[^\"\n]*pyspark/[^\"\n]*\", line \d+, in \w+\n(?:    .*\n)*)*"
    r"(?:BrokenPipeError|ConnectionResetError): \[Errno \d+\] [^\n]*\n",
)


def test_corruption_mid_journal_is_one_line_without_java_stack(
    journals: dict[str, Path], tmp_path: Path
) -> None:
    # A subprocess: the JVM's console is its own stderr, which only a separate run captures.
    data = tmp_path / "data"
    shutil.copytree(journals["timers"], data)
    [segment] = (data / "d" / "journal").glob("*.seg")
    blob = bytearray(segment.read_bytes())
    blob[40] ^= 0xFF  # inside the first record's payload: its CRC no longer matches
    segment.write_bytes(bytes(blob))
    # A later segment, so the damaged one is sealed: corruption, not a torn tail.
    later = segment.with_name(f"{int(segment.stem) + 3:020d}.seg")
    later.write_bytes(encode_header(int(later.stem)))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "purgatory_pipeline",
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            "ingest",
            "--journal",
            str(data),
            "--out",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 2, run.stderr[-3000:]
    errors = [ln for ln in run.stderr.splitlines() if " error: " in ln]
    assert len(errors) == 1, run.stderr[-3000:]
    assert "JournalCorruptionError" in errors[0]
    assert f"{segment.name} at byte offset 24: record CRC mismatch" in errors[0]
    # Spark's Python daemon (not our code) sometimes prints one of these when the JVM
    # closes a failed task's socket before the worker flushed (which one depends on
    # spark.python.daemon.killWorkerOnFlushFailure): a race inside Spark, documented in
    # docs/pipeline.md. Everything else on the console is checked.
    console = run.stderr
    for notice in _DAEMON_NOTICES:
        console = re.sub(notice, "", console)
    assert "at org.apache" not in console and "Traceback" not in console, console[:3000]


def test_quiet_by_default_spark_and_py4j_log_to_a_file_under_the_output(
    journals: dict[str, Path], tmp_path: Path
) -> None:
    # `make pipeline`'s ingest on a first run (no tables yet: Spark warns "All paths were
    # ignored"; py4j logs its connection's end), with nothing asked about logs.
    out = tmp_path / "t"
    run = CliProcess(["ingest", "--journal", str(journals["timers"]), "--out", str(out)])
    status, console, stdout = run.finish(timeout_s=300)
    assert status == 0, console
    assert console and all(OUR_LINE.match(line) for line in console), console
    assert not [line for line in console if any(mark in line for mark in SPARK_MARKS)]
    log = out / "_logs" / "spark-ingest.log"
    assert [line for line in console if "Spark's log" in line] == [console[0]] and console[
        0
    ].endswith(f"ingest: Spark's log: {log}")  # printed once, first
    assert any("ingest: decode 1 of 1 segments" in line for line in console), console
    assert "ingest: done: 6 records from 1 new segments" in console[-1], console
    assert json.loads(stdout)["rows"]["operations"] == 3  # the result, on stdout
    text = log.read_text()
    assert "WARN DataSource: All paths were ignored" in text  # Spark's lines went there
    assert "Using incubator modules" in text  # the JVM's own stderr too
    assert "INFO py4j.clientserver: Closing down clientserver connection" in text


def test_ctrl_c_ends_an_ingest_with_one_line(journals: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "t"
    run = CliProcess(["ingest", "--journal", str(journals["timers"]), "--out", str(out)])
    run.wait_for("ingest: decode")  # Spark is up and the first job starts
    run.interrupt()
    status, after, stdout = run.finish()
    assert status == 130, run.lines
    assert len(after) == 1 and OUR_LINE.match(after[0]), run.lines
    assert after[0].endswith("ingest: interrupted (Ctrl-C): stopping"), after
    assert stdout == ""  # no result: the ingest did not go on to the end
    assert not (out / "_ingest.json").exists()


_OWN_SESSION = """
import sys
from pyspark.sql import SparkSession
from purgatory_pipeline import cli
status = cli.main(sys.argv[1:])
print("session", "stopped" if SparkSession.getActiveSession() is None else "left running")
sys.exit(status)
"""


def test_a_command_stops_the_session_it_started(journals: dict[str, Path], tmp_path: Path) -> None:
    # A subprocess: there the CLI starts its own session (here the tests' session is held,
    # and the commands above ran in it and left it up, or the next test would fail).
    events = tmp_path / "events"
    events.mkdir()
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            _OWN_SESSION,
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.eventLog.enabled=true",
            "--conf",
            f"spark.eventLog.dir={events.as_uri()}",
            "--conf",
            "spark.eventLog.compress=false",
            "ingest",
            "--journal",
            str(journals["timers"]),
            "--out",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "session stopped" in run.stdout, run.stdout[-1000:]
    # So the event log is whole when the command returns: marked finished (a history
    # server lists an unfinished one as still running) and ending with the application.
    written = [path.name for path in events.rglob("*") if path.is_file()]
    assert not [name for name in written if name.endswith(".inprogress")], written
    [log] = [path for path in events.rglob("events_*") if path.is_file()]
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["Event"] == "SparkListenerApplicationEnd", last


def _table_rows(spark: Any, tables: Path) -> dict[str, list[Any]]:
    return {
        name: sorted(map(tuple, read_table(spark, str(tables), name).drop("date").collect()))
        for name in TABLE_COLUMNS
    }


def test_incremental_ingest_decodes_only_new_segments(
    spark: Any, journals: dict[str, Path], tmp_path: Path
) -> None:
    from purgatory_pipeline.ingest import ingest
    from purgatory_proto.v1.journal_pb2 import JournalRecord
    from purgatory_server._journal.framing import encode_frame

    data = tmp_path / "data"
    shutil.copytree(journals["timers"], data)
    tables = tmp_path / "tables"
    first = ingest(spark, [str(data)], str(tables))
    assert first.segments_decoded == 1  # the journal's only segment
    # The server rolled over: a new head segment with one signal; the old one is sealed.
    journal = data / "d" / "journal"
    [old] = journal.glob("*.seg")
    base = int(old.stem) + sum(first.records.values())
    signal = JournalRecord(
        signal=JournalRecord.SignalApplied(purgatory="d", key="k9", source="r1", applied_wall_ms=1)
    )
    (journal / f"{base:020d}.seg").write_bytes(
        encode_header(base) + encode_frame(signal.SerializeToString())
    )
    second = ingest(spark, [str(data)], str(tables))
    assert second.segments_decoded == 1  # the new one; the old one did not change
    with (journal / f"{base:020d}.seg").open("ab") as head:  # the head grows: decoded again
        head.write(encode_frame(signal.SerializeToString()))
    third = ingest(spark, [str(data)], str(tables))
    assert third.segments_decoded == 1
    assert ingest(spark, [str(data)], str(tables)).segments_decoded == 0
    assert second.records == {**first.records, "signal": 1}
    assert third.records == {**first.records, "signal": 2}
    assert third.rows["signals"] == 2 and third.rows["operations"] == 3
    incremental = _table_rows(spark, tables)
    full = ingest(spark, [str(data)], str(tmp_path / "full"), full=True)
    assert full.segments_decoded == 2 and full.records == third.records
    assert incremental == _table_rows(spark, tmp_path / "full")


def test_kind_and_purgatory_filters_are_applied_in_the_source(
    spark: Any, journals: dict[str, Path]
) -> None:
    from pyspark.sql import functions as F

    records = spark.read.format("purgatory-journal").load(str(journals["timers"]))
    everything = records.groupBy("kind").count().collect()
    assert {r["kind"]: r["count"] for r in everything} == {"registered": 3, "outcome": 3}
    pushed = records.filter((F.col("kind") == "outcome") & (F.col("purgatory") == "d"))
    plan = pushed._jdf.queryExecution().optimizedPlan().toString()
    assert "outcome" not in plan and "purgatory#" in plan  # both handed to the source
    assert pushed.count() == 3
    assert records.filter(F.col("kind").isin("signal", "torn_tail")).count() == 0
    assert records.filter(F.col("purgatory") == "other").count() == 0
