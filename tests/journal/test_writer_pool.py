"""Many journals on one WriterPool: a fixed number of writer threads, each journal's
order kept, interval fsyncs owed by idle journals still made, one journal's failure only
its own, and no thread left once the journals are closed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from purgatory_server._journal import (
    FsyncPolicy,
    Journal,
    JournalConfig,
    JournalFailedError,
    WriterPool,
)

from tests.journal.helpers import CountingFsync, reg


def _writer_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("pool-writer")}


def test_sixty_journals_share_two_threads_and_keep_their_order(tmp_path: Path) -> None:
    pool = WriterPool(2, "pool-writer")
    config = JournalConfig(fsync=FsyncPolicy.ALWAYS)
    journals = [Journal.open(tmp_path / f"j{i}", config, writers=pool) for i in range(60)]
    try:
        assert _writer_threads() == {"pool-writer-0", "pool-writer-1"}
        futures = [
            (journal, n, journal.submit([reg(f"op-{n}", "k")]))
            for n in range(5)
            for journal in journals
        ]
        for _journal, n, future in futures:
            assert future.result(10) == n  # each journal's own order: 0, 1, 2, ...
        assert pool.journals() == 60
    finally:
        for journal in journals:
            journal.close()
    for journal in journals:
        reopened = Journal.open(journal.directory)
        assert len(reopened.recovered.pending) == 5
        reopened.close()
    assert pool.journals() == 0
    for thread in threading.enumerate():
        if thread.name.startswith("pool-writer"):
            thread.join(5)
    assert _writer_threads() == set()  # an idle pool holds no thread


def test_an_idle_journal_still_gets_its_interval_fsync(tmp_path: Path) -> None:
    pool = WriterPool(1, "pool-writer-interval")
    synced = threading.Event()
    fsync = CountingFsync()

    def fsync_and_signal(fd: int) -> None:
        fsync(fd)
        synced.set()

    config = JournalConfig(fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=20)
    busy = Journal.open(tmp_path / "busy", config, writers=pool)
    quiet = Journal.open(tmp_path / "quiet", config, fsync=fsync_and_signal, writers=pool)
    try:
        synced.clear()
        quiet.append_sync([reg("one", "k")])  # acknowledged after write(), fsync owed
        busy.append_sync([reg("other", "k")])
        assert synced.wait(5), "the quiet journal's interval fsync never came"
    finally:
        busy.close()
        quiet.close()


def test_one_journals_failure_leaves_the_others_writing(tmp_path: Path) -> None:
    pool = WriterPool(1, "pool-writer-fail")
    broken = threading.Event()

    def failing(fd: int) -> None:
        if broken.is_set():
            raise OSError(5, "Input/output error")

    bad = Journal.open(tmp_path / "bad", writers=pool, fsync=failing)
    good = Journal.open(tmp_path / "good", writers=pool)
    broken.set()  # (opening fsyncs the new directory: fail only the appends)
    try:
        with pytest.raises(JournalFailedError):
            bad.append_sync([reg("lost", "k")], timeout=10)
        assert good.append_sync([reg("kept", "k")], timeout=10) == 0
        assert pool.journals() == 1
    finally:
        bad.close()
        good.close()
