"""The data source through Spark: clear errors for bad input, URIs, the CLI's exit status."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from purgatory_pipeline import cli
from purgatory_pipeline.errors import NotAJournalError
from purgatory_pipeline.source import plan, read_partition
from purgatory_server._journal.framing import encode_header

from tests.pipeline.conftest import Workload


def _error(spark: Any, path: str) -> str:
    with pytest.raises(Exception) as caught:
        spark.read.format("purgatory-journal").load(path).count()
    return str(caught.value)


def test_a_path_without_a_journal(tmp_path: Path) -> None:
    # Planning runs on the driver; the CLI test below shows the same error through Spark.
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotAJournalError, match="holds no journal"):
        plan([str(tmp_path / "empty")])
    with pytest.raises(NotAJournalError, match="no such file or directory"):
        plan([str(tmp_path / "missing")])


def test_a_file_that_is_not_a_segment(tmp_path: Path) -> None:
    text = tmp_path / "README.txt"
    text.write_text("hello\n" * 10)
    [part] = plan([str(text)])
    with pytest.raises(NotAJournalError, match="is not a journal segment"):
        list(read_partition(part))


def test_a_newer_format_version(spark: Any, tmp_path: Path) -> None:
    import struct
    import zlib

    head = struct.pack("<8sHHQ", b"PGJRNL\r\n", 3, 0, 0)
    directory = tmp_path / "journal"
    directory.mkdir()
    (directory / f"{0:020d}.seg").write_bytes(head + struct.pack("<I", zlib.crc32(head)))
    (directory / f"{1:020d}.seg").write_bytes(encode_header(1))
    assert "journal format version 3" in _error(spark, str(directory))


def test_file_uri_reads_the_same_records(spark: Any, work: Workload) -> None:
    plain = spark.read.format("purgatory-journal").load(str(work.journal_dir)).count()
    uri = spark.read.format("purgatory-journal").load(work.journal_dir.as_uri()).count()
    assert plain == uri == len(work.oracle.records) + 1  # + the torn_tail row


def test_cli_prints_one_line_and_exits_2(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "nothing").mkdir()
    with caplog.at_level(logging.ERROR, logger="purgatory_pipeline"):
        status = cli.main(
            ["ingest", "--journal", str(tmp_path / "nothing"), "--out", str(tmp_path / "t")]
        )
    assert status == 2
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "holds no journal" in record.getMessage()
    assert "\n" not in record.getMessage()
