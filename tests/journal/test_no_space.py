"""Out of space is capacity that frees up: the partial write is undone, the records wait
in order and are written once space is back; EIO stays fatal."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest
from purgatory_server._journal import (
    FsyncPolicy,
    Journal,
    JournalConfig,
    JournalFailedError,
    SegmentScan,
)

from tests.journal.helpers import CountingFsync, Disk, reg, segment_paths


def _until(predicate: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def _ids(path: Path) -> list[str]:
    from purgatory_proto.v1.journal_pb2 import JournalRecord

    return [
        JournalRecord.FromString(bytes(payload)).registered.operation_id
        for seg in segment_paths(path)
        for _, payload in SegmentScan.read(seg)
    ]


CONFIG = JournalConfig(fsync=FsyncPolicy.ALWAYS, segment_bytes=4096, space_retry_ms=20)


def test_writes_wait_out_of_space_and_resume_in_order(tmp_path: Path) -> None:
    disk = Disk()
    journal = Journal.open(tmp_path, CONFIG, _write=disk)
    try:
        assert journal.append_sync([reg("a", "k")]) == 0
        size = sum(p.stat().st_size for p in segment_paths(tmp_path))
        disk.error = errno.ENOSPC
        stalled = journal.submit([reg("b", "k")])
        _until(lambda: journal.no_space is not None)
        assert "ENOSPC" in (journal.no_space or "")
        # The torn 5 bytes were truncated away: the file holds whole records only.
        assert sum(p.stat().st_size for p in segment_paths(tmp_path)) == size
        queued = [journal.submit([reg(f"c{i}", "k", payload=b"x" * 100)]) for i in range(60)]
        _until(lambda: disk.refused >= 3)  # retried on its own, still full
        assert not stalled.done() and not any(f.done() for f in queued)
        disk.error = None
        assert stalled.result(5) == 1
        assert [f.result(5) for f in queued] == list(range(2, 62))  # rolls included
        assert journal.no_space is None
    finally:
        journal.close()
    assert _ids(tmp_path) == ["a", "b", *(f"c{i}" for i in range(60))]
    with Journal.open(tmp_path, CONFIG) as reopened:
        assert len(reopened.recovered.pending) == 62


def test_a_roll_out_of_space_leaves_no_half_made_segment(tmp_path: Path) -> None:
    disk = Disk()
    with Journal.open(tmp_path, CONFIG, _write=disk) as journal:
        while len(segment_paths(tmp_path)) == 1:
            journal.append_sync([reg(f"f{len(_ids(tmp_path))}", "k", payload=b"y" * 200)])
        before = segment_paths(tmp_path)
        last = before[-1]
        fill = 0
        while last.stat().st_size + 300 < CONFIG.segment_bytes:
            journal.append_sync([reg(f"g{fill}", "k", payload=b"y" * 200)])
            fill += 1
        disk.refused, disk.error = 1, errno.EDQUOT  # no torn bytes: the roll itself fails
        rolled = journal.submit([reg("r", "k", payload=b"z" * 400)])
        _until(lambda: journal.no_space is not None)
        assert segment_paths(tmp_path) == before
        disk.error = None
        rolled.result(5)
    assert _ids(tmp_path)[-1] == "r"


def test_eio_stays_fatal(tmp_path: Path) -> None:
    disk = Disk()
    with Journal.open(tmp_path, CONFIG, _write=disk) as journal:
        disk.refused, disk.error = 1, errno.EIO
        with pytest.raises(JournalFailedError):
            journal.append_sync([reg("a", "k")], timeout=5)
        with pytest.raises(JournalFailedError):
            journal.submit([reg("b", "k")])


def test_closing_out_of_space_fails_what_is_unwritten(tmp_path: Path) -> None:
    disk = Disk()
    journal = Journal.open(tmp_path, CONFIG, _write=disk)
    disk.refused, disk.error = 1, errno.ENOSPC
    stalled = journal.submit([reg("a", "k")])
    _until(lambda: journal.no_space is not None)
    journal.close()
    with pytest.raises(JournalFailedError, match="unwritten"):
        stalled.result(5)


def test_what_was_written_still_gets_its_interval_fsync_while_stalled(tmp_path: Path) -> None:
    disk, fsync, now = Disk(), CountingFsync(), [0.0]
    config = JournalConfig(fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=20, space_retry_ms=10)
    journal = Journal.open(tmp_path, config, fsync=fsync, clock=lambda: now[0], _write=disk)
    try:
        journal.append_sync([reg("a", "k")])  # written; its fsync is due in 20 ms (clock)
        disk.refused, disk.error = 1, errno.ENOSPC
        stalled = journal.submit([reg("b", "k")])
        _until(lambda: journal.no_space is not None)
        synced = fsync.calls
        now[0] += 1.0  # the interval passes while the journal is stalled
        _until(lambda: fsync.calls > synced)
        assert not stalled.done()
        disk.error = None
        assert stalled.result(5) == 1
    finally:
        journal.close()
