"""The decode job: workers write ``_records`` themselves, and the result is Spark's writer's.

A piece decoded twice (a task attempted again) leaves one file, not two, and nothing a
reader could see half-written; its summary counts what it wrote. An ingest whose output
pyarrow cannot open goes through Spark's writer and gives the same tables and counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from purgatory_pipeline import decode_job
from purgatory_pipeline import ingest as ingest_module
from purgatory_pipeline.errors import JournalCorruptionError, UnsupportedLocationError
from purgatory_pipeline.records import decode_segment
from purgatory_pipeline.source import plan

from tests.pipeline.test_incremental import (
    Journal,
    _outcome,
    _registered,
    _rows,
    _signal,
)


def _journal(tmp_path: Path) -> Path:
    """Two segments; the head ends in a torn frame, which recovery would cut."""
    journal = Journal(tmp_path / "data" / "p" / "journal")
    journal.roll([_registered("p", f"op{i}", i) for i in range(20)])
    journal.roll([_signal("p", 30), *(_outcome("p", f"op{i}", 40 + i, i + 1) for i in range(12))])
    assert journal.head is not None
    with journal.head.open("ab") as handle:
        handle.write(b"\x07\x00\x00\x00torn")
    return journal.directory


def test_a_piece_decoded_again_replaces_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decode_job, "ROW_GROUP_ROWS", 5)  # several row groups per file
    directory = _journal(tmp_path)
    head = plan([str(directory)])[-1]
    out = tmp_path / "records"
    piece = decode_job.Piece(head, str(out), 7)
    spec = piece.spec()
    first = decode_job._decode_piece(spec).to_pylist()
    second = decode_job._decode_piece(spec).to_pylist()

    assert first == second
    # No second file, no temp; the piece's marker (what a resumed run reads) once.
    assert sorted(p.name for p in out.iterdir()) == [
        "_decoded-part-00007.json",
        "part-00007.parquet",
    ]
    written = pq.ParquetFile(out / "part-00007.parquet")
    assert written.metadata.num_row_groups > 1
    expected = [
        row
        for batch in decode_segment(
            head.journal, head.uri, Path(head.uri).read_bytes(), is_last=True
        )
        for row in batch.to_pylist()
    ]
    assert written.read().to_pylist() == expected
    (summary,) = first
    assert dict(summary["records"]) == {"signal": 1, "outcome": 12, "torn_tail": 1}
    assert summary["torn"] == [
        {"offset": row["byte_offset"], "bytes": row["torn_bytes"]}
        for row in expected
        if row["kind"] == "torn_tail"
    ]


def test_an_output_pyarrow_cannot_open_goes_through_sparks_writer(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _journal(tmp_path).parent.parent
    workers = ingest_module.ingest(spark, [str(data)], str(tmp_path / "workers"))

    def refuse(uri: str) -> Any:
        raise UnsupportedLocationError(f"{uri}: not here")

    monkeypatch.setattr(ingest_module, "open_uri", refuse)
    through_spark = ingest_module.ingest(spark, [str(data)], str(tmp_path / "spark"))

    assert workers.records == through_spark.records
    assert workers.records["outcome"] == 12
    assert (workers.torn_tails, workers.torn_bytes) == (1, through_spark.torn_bytes)
    assert _rows(spark, tmp_path / "workers") == _rows(spark, tmp_path / "spark")
    spark_files = list((tmp_path / "spark" / "_records").rglob("*.parquet"))
    assert spark_files
    assert all(p.name.startswith("part-") and ".c000." in p.name for p in spark_files)


def test_a_piece_that_fails_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_job, "ROW_GROUP_ROWS", 5)
    journal = Journal(tmp_path / "data" / "p" / "journal")
    journal.roll([_registered("p", f"op{i}", i) for i in range(9_000)])  # > one Arrow batch
    journal.roll([_signal("p", 1)])
    sealed = plan([str(journal.directory)])[0]
    damaged = bytearray(Path(sealed.uri).read_bytes())
    damaged[-20] ^= 0xFF  # inside the sealed segment's last frame: corruption, not a torn tail
    Path(sealed.uri).write_bytes(bytes(damaged))
    out = tmp_path / "records"
    spec = decode_job.Piece(sealed, str(out), 0).spec()

    with pytest.raises(JournalCorruptionError):
        decode_job._decode_piece(spec)
    assert list(out.iterdir()) == []  # the rows before the damage were written, then removed
