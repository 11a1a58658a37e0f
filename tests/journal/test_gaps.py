"""Contiguity: records missing below the first segment (or between two) refuse the open,
naming the range; ``repair`` opens without them, logs the loss and is not asked again."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig, JournalGapError

from tests.journal.helpers import out, reg, segment_paths

SMALL = JournalConfig(fsync=FsyncPolicy.NEVER, segment_bytes=4096, auto_compact=False)


def _segments(path: Path, count: int, start: int = 0) -> list[Path]:
    with Journal.open(path, SMALL) as journal:
        for i in range(start, start + count):
            journal.append_sync([reg(f"op{i}", "k", payload=b"x" * 40)])
    return segment_paths(path)


def test_a_missing_first_segment_refuses_to_open_naming_the_range(tmp_path: Path) -> None:
    segs = _segments(tmp_path, 200)
    assert len(segs) >= 3
    second = int(segs[1].name.removesuffix(".seg"))
    segs[0].unlink()
    with pytest.raises(JournalGapError, match=rf"missing records \[0, {second}\)") as info:
        Journal.open(tmp_path, SMALL)
    assert (info.value.first, info.value.end) == (0, second)
    assert "\n" not in str(info.value)


def test_repair_opens_without_them_logs_the_loss_and_the_next_open_accepts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segs = _segments(tmp_path, 200)
    second = int(segs[1].name.removesuffix(".seg"))
    segs[0].unlink()
    with (
        caplog.at_level(logging.ERROR, "purgatory_server._journal"),
        Journal.open(tmp_path, SMALL, repair=True) as journal,
    ):
        assert journal.report.missing == (0, second)
        assert set(journal.recovered.pending) == {f"op{i}" for i in range(second, 200)}
    assert f"records [0, {second}) are lost ({second} records)" in caplog.text
    with Journal.open(tmp_path, SMALL) as journal:  # the checkpoint repair wrote: no refusal
        assert journal.report.missing is None
        assert len(journal.recovered.pending) == 200 - second


def test_segments_compaction_deleted_are_not_missing_one_more_is(tmp_path: Path) -> None:
    config = JournalConfig(
        fsync=FsyncPolicy.NEVER, segment_bytes=4096, auto_compact=False, retain_events=10
    )
    with Journal.open(tmp_path, config) as journal:
        for i in range(200):
            journal.append_sync([reg(f"op{i}", "k", payload=b"x" * 40), out(f"op{i}", i + 1)])
        assert journal.compact(force=True).deleted_segments > 0
        for i in range(200, 400):  # more segments after the one holding the checkpoint
            journal.append_sync([reg(f"op{i}", "k", payload=b"x" * 40)])
    segs = segment_paths(tmp_path)
    assert len(segs) >= 2
    start = int(segs[0].name.removesuffix(".seg"))
    assert start > 0
    assert (tmp_path / "START").read_text() == f"{start}\n"
    with Journal.open(tmp_path, config):  # compacted: starts where START says
        pass
    (tmp_path / "START").unlink()  # compacted before START existed: the checkpoint says
    with Journal.open(tmp_path, config):
        pass
    (tmp_path / "START").write_text(f"{start}\n")
    segs[0].unlink()  # it held the checkpoint too: START still says where the journal began
    end = int(segs[1].name.removesuffix(".seg"))
    with pytest.raises(JournalGapError, match=rf"missing records \[{start}, {end}\)"):
        Journal.open(tmp_path, config)


def test_a_missing_middle_segment_names_the_range(tmp_path: Path) -> None:
    segs = _segments(tmp_path, 200)
    first, second = (int(s.name.removesuffix(".seg")) for s in segs[1:3])
    segs[1].unlink()
    with pytest.raises(Exception, match=rf"records \[{first}, {second}\) are missing"):
        Journal.open(tmp_path, SMALL)


def test_every_segment_deleted_after_a_compaction_is_refused(tmp_path: Path) -> None:
    config = JournalConfig(
        fsync=FsyncPolicy.NEVER, segment_bytes=4096, auto_compact=False, retain_events=10
    )
    with Journal.open(tmp_path, config) as journal:
        for i in range(200):
            journal.append_sync([reg(f"op{i}", "k", payload=b"x" * 40), out(f"op{i}", i + 1)])
        journal.compact(force=True)
    start = int((tmp_path / "START").read_text())
    for path in segment_paths(tmp_path):
        path.unlink()
    with pytest.raises(JournalGapError, match=f"missing every record from index {start} on"):
        Journal.open(tmp_path, config)
    with Journal.open(tmp_path, config, repair=True) as journal:
        assert journal.append_sync([reg("new", "k")]) == start  # the journal goes on there
    with Journal.open(tmp_path, config) as journal:
        assert set(journal.recovered.pending) == {"new"}
