"""A first ingest killed with SIGKILL part-way is resumed: the rerun decodes only what was left.

Then, over the same tables: what a reader sees while an incremental run rewrites
partitions, and the tables registered in Spark's catalog.

The first run is a real ``purgatory-pipeline ingest`` subprocess (``local[1]``: one segment
at a time), killed with its whole process group (driver, JVM, Python workers) as soon as
``_records`` holds one segment decoded whole. The segments it finished are counted after it
died (a few more may have finished between the look and the kill); the rerun must decode
exactly the others and give the tables every record once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from purgatory_pipeline import ingest as ingest_module
from purgatory_pipeline.catalog import register_tables
from purgatory_pipeline.checkpoint import fingerprint
from purgatory_pipeline.decode_job import finished
from purgatory_pipeline.incremental import segment_key
from purgatory_pipeline.ingest import ingest, read_records, read_table
from purgatory_pipeline.source import open_uri, plan
from purgatory_proto.v1 import purgatory_pb2
from purgatory_proto.v1.journal_pb2 import JournalRecord as JR
from purgatory_server._journal.framing import encode_frame, encode_header

SEGMENTS = 4
OPERATIONS_PER_SEGMENT = 3_000  # 3 records each: a registration, a signal, an outcome
T0 = 1_790_000_000_000
ANY = purgatory_pb2.Condition(any_key=purgatory_pb2.AnyKeyCondition()).SerializeToString()


def _operation(op: str, at: int, sequence: int) -> list[JR]:
    registered = JR.OperationRegistered(
        purgatory="r",
        operation_id=op,
        keys=[f"k-{op}"],
        timeout_ms=1_000,
        condition=ANY,
        created_wall_ms=T0 + at,
        due_wall_ms=T0 + at + 1_000,
    )
    signal_applied = JR.SignalApplied(
        purgatory="r", key=f"k-{op}", source="s", applied_wall_ms=T0 + at + 1
    )
    outcome = JR.Outcome(
        purgatory="r",
        operation_id=op,
        state=JR.Outcome.STATE_COMPLETED,
        sequence=sequence,
        completed_wall_ms=T0 + at + 1,
    )
    return [JR(registered=registered), JR(signal=signal_applied), JR(outcome=outcome)]


def _write_journal(directory: Path) -> None:
    directory.mkdir(parents=True)
    index = 0
    for segment in range(SEGMENTS):
        frames = [encode_header(index)]
        for n in range(OPERATIONS_PER_SEGMENT):
            number = segment * OPERATIONS_PER_SEGMENT + n
            for record in _operation(f"op-{number}", number, number + 1):
                frames.append(encode_frame(record.SerializeToString()))
                index += 1
        (directory / f"{index - 3 * OPERATIONS_PER_SEGMENT:020d}.seg").write_bytes(b"".join(frames))


def _decoded_whole(journal: Path, out: Path) -> int:
    """How many segments ``out/_records`` holds whole, by their markers."""
    filesystem, records = open_uri(str(out / "_records"))
    count = 0
    for part in plan([str(journal)]):
        key = segment_key(part.journal, part.uri)
        directory = f"{records}/segment_key={key}"
        if finished(filesystem, directory, part.uri, fingerprint(part.uri)) is not None:
            count += 1
    return count


def _kill_after_first_segment(journal: Path, out: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "purgatory_pipeline",
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--spark-log",
        str(out.parent / "spark.log"),
        "ingest",
        "--journal",
        str(journal),
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 240
        while _decoded_whole(journal, out) < 1:
            assert proc.poll() is None, f"ingest exited ({proc.returncode}) before one segment"
            assert time.monotonic() < deadline, "no segment decoded in time"
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


@dataclass
class Resumed:
    journal: Path
    out: Path
    done: int  # segments the killed run had decoded whole
    summary: Any


@pytest.fixture(scope="module")
def resumed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Resumed:
    root = tmp_path_factory.mktemp("resume")
    journal = root / "r" / "journal"
    _write_journal(journal)
    out = root / "tables"
    _kill_after_first_segment(journal, out)
    done = _decoded_whole(journal, out)  # the group is dead: what the rerun finds
    assert not (out / "_segments.json").exists()  # killed before its checkpoint: a first run
    return Resumed(journal, out, done, ingest(spark, [str(journal)], str(out)))


def test_a_killed_first_ingest_is_resumed_decoding_only_the_rest(
    spark: Any, resumed: Resumed
) -> None:
    summary, done, out = resumed.summary, resumed.done, str(resumed.out)
    assert 1 <= done < SEGMENTS, done
    assert (summary.segments_decoded, summary.segments_resumed) == (SEGMENTS - done, done)
    operations = SEGMENTS * OPERATIONS_PER_SEGMENT
    assert summary.records == {
        "outcome": operations,
        "registered": operations,
        "signal": operations,
    }
    records = read_records(spark, out)
    assert records.count() == records.select("index").distinct().count() == 3 * operations
    assert read_table(spark, out, "operations").count() == operations
    assert read_table(spark, out, "events").select("index").distinct().count() == operations


def test_readers_see_every_partition_an_ingest_does_not_rewrite(
    spark: Any, resumed: Resumed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/pipeline.md, "Reading while an ingest runs": what a reader sees mid-rewrite."""
    operations = SEGMENTS * OPERATIONS_PER_SEGMENT
    index = 3 * operations
    moved = JR(rescheduled=JR.OperationRescheduled(purgatory="r", operation_id="op-0"))
    later = _operation("op-new", operations, operations + 1)
    frames = [encode_frame(r.SerializeToString()) for r in [moved, *later]]
    (resumed.journal / f"{index:020d}.seg").write_bytes(encode_header(index) + b"".join(frames))
    out = str(resumed.out)
    seen: list[tuple[str, int, dict[str, int]]] = []
    real_drop = ingest_module.drop_partitions

    def drop_and_read(spark_: Any, table: str, keys: Any) -> int:
        dropped = real_drop(spark_, table, keys)
        counts = {name: read_table(spark, out, name).count() for name in ("signals", "operations")}
        seen.append((table.rsplit("/", 1)[-1], len(set(keys)), counts))
        return dropped

    monkeypatch.setattr(ingest_module, "drop_partitions", drop_and_read)
    summary = ingest(spark, [str(resumed.journal)], out)
    assert summary.segments_decoded == 1
    old = {"signals": operations, "operations": operations}
    # The new segment's partitions are dropped first (it had none): every old row reads.
    assert seen[:2] == [("signals", 1, old), ("events", 1, old)]
    # Then operations' partitions of op-0's home and of the new segment: while they are
    # rewritten the home's rows are missing; every other segment's rows are there, whole.
    assert seen[2] == ("operations", 2, {**old, "operations": operations - OPERATIONS_PER_SEGMENT})
    assert read_table(spark, out, "operations").count() == operations + 1
    assert read_table(spark, out, "signals").count() == operations + 1


def test_tables_registered_in_the_catalog_read_as_the_files(spark: Any, resumed: Resumed) -> None:
    out = str(resumed.out)
    names = register_tables(spark, out, "resumed")
    assert names == ["resumed.operations", "resumed.signals", "resumed.events"]
    for name in ("operations", "signals", "events"):
        table = spark.table(f"resumed.{name}")
        files = read_table(spark, out, name)
        assert sorted(table.columns) == sorted(files.columns)
        assert table.count() == files.count() > 0
    partitions = spark.sql("SHOW PARTITIONS resumed.operations").collect()
    assert len(partitions) == len(list((resumed.out / "operations").glob("*/*/segment_key=*")))
    assert register_tables(spark, out, "resumed") == names  # again: replaced, not refused
