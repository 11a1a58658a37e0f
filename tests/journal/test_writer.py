"""The writer: ordering, segment roll, fsync policies and group commit."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import (
    FsyncPolicy,
    Journal,
    JournalClosedError,
    JournalConfig,
    JournalError,
    JournalFailedError,
    SegmentScan,
)
from purgatory_server._journal.framing import decode_header

from tests.journal.helpers import CountingFsync, State, out, reg, segment_paths, sig


class GatedFsync(CountingFsync):
    """Blocks the first fsync of a file until ``gate`` is set (to build a backlog)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.blocked = threading.Event()

    def __call__(self, fd: int) -> None:
        if not self.gate.is_set() and not os.path.isdir(f"/proc/self/fd/{fd}"):
            self.blocked.set()
            assert self.gate.wait(10)
        super().__call__(fd)


def all_records(path: Path) -> list[JournalRecord]:
    records = []
    for seg in segment_paths(path):
        for _, payload in SegmentScan.read(seg):
            records.append(JournalRecord.FromString(bytes(payload)))
    return records


def test_append_returns_indices_and_survives_reopen(tmp_path: Path) -> None:
    with Journal.open(tmp_path) as journal:
        assert journal.append_sync([reg("a", "k"), sig("k", 2)]) == 0
        assert journal.append_sync([out("a", 1)]) == 2
        assert journal.recovered.next_index == 0
    with Journal.open(tmp_path) as journal:
        assert journal.recovered.next_index == 3
        assert journal.recovered.ended == frozenset({"a"})
        assert journal.append_sync([reg("b")]) == 3


def test_segments_roll_at_the_size_bound_with_documented_names(tmp_path: Path) -> None:
    config = JournalConfig(fsync=FsyncPolicy.NEVER, segment_bytes=4096, auto_compact=False)
    big = reg("big", payload=b"x" * 10_000)  # larger than a segment: gets one to itself
    with Journal.open(tmp_path, config) as journal:
        for i in range(300):
            journal.append_sync([reg(f"op{i}", "k")])
        journal.append_sync([big, reg("after")])
    segs = segment_paths(tmp_path)
    assert len(segs) > 3
    expected_base = 0
    for seg in segs:
        scan = SegmentScan.read(seg)
        count = sum(1 for _ in scan)
        assert scan.error is None
        assert seg.name == f"{expected_base:020d}.seg"
        assert decode_header(seg.read_bytes()) == expected_base
        if count > 1:
            assert seg.stat().st_size <= 4096
        expected_base += count
    assert expected_base == 302
    assert [r.registered.operation_id for r in all_records(tmp_path)][-2:] == ["big", "after"]


def test_group_commit_across_threads(tmp_path: Path) -> None:
    fsync = GatedFsync()
    journal = Journal.open(tmp_path, fsync=fsync)
    try:
        threads_n, per_thread = 16, 5
        submitted = threading.Semaphore(0)
        results: dict[int, list[int]] = {}

        def worker(t: int) -> None:
            for i in range(per_thread):
                future = journal.submit([sig(f"t{t}", amount=i)])
                submitted.release()
                results.setdefault(t, []).append(future.result(10))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
        for thread in threads:
            thread.start()
        assert fsync.blocked.wait(10)
        # Every thread's first append is queued or being written; none can finish yet.
        for _ in range(threads_n):
            assert submitted.acquire(timeout=10)
        fsync.gate.set()
        for thread in threads:
            thread.join(10)
        appends = threads_n * per_thread
        assert sorted(i for r in results.values() for i in r) == list(range(appends))
        assert journal.fsync_count < appends
        for t, indices in results.items():
            assert indices == sorted(indices), f"thread {t} out of order"
    finally:
        journal.close()
    amounts_by_key: dict[str, list[int]] = {}
    for record in all_records(tmp_path):
        amounts_by_key.setdefault(record.signal.key, []).append(record.signal.amount)
    assert all(v == list(range(per_thread)) for v in amounts_by_key.values())


async def test_group_commit_across_asyncio_tasks(tmp_path: Path) -> None:
    fsync = GatedFsync()
    journal = Journal.open(tmp_path, fsync=fsync)
    try:
        tasks = [asyncio.create_task(journal.append([sig("k", amount=i)])) for i in range(200)]
        await asyncio.sleep(0)  # every task runs up to its await: all 200 are submitted
        assert fsync.blocked.wait(10)
        before = journal.fsync_count
        fsync.gate.set()
        indices = await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert sorted(indices) == list(range(200))
        assert journal.fsync_count - before <= 2  # the blocked batch + everything queued
    finally:
        journal.close()


async def test_cancelling_the_waiter_does_not_withdraw_the_record(tmp_path: Path) -> None:
    fsync = GatedFsync()
    with Journal.open(tmp_path, fsync=fsync) as journal:
        task = asyncio.create_task(journal.append([reg("kept")]))
        await asyncio.sleep(0)
        assert fsync.blocked.wait(10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        fsync.gate.set()
    assert [r.registered.operation_id for r in all_records(tmp_path)] == ["kept"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_interval_policy_fsyncs_at_most_every_interval(tmp_path: Path) -> None:
    clock = FakeClock()
    fsync = CountingFsync()
    synced = threading.Event()
    original: Callable[[int], None] = fsync

    def fsync_and_signal(fd: int) -> None:
        original(fd)
        synced.set()

    config = JournalConfig(fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=10)
    with Journal.open(tmp_path, config, fsync=fsync_and_signal, clock=clock) as journal:
        for i in range(20):
            journal.append_sync([sig("k", i)])  # returns after write(), no fsync due yet
        clock.now += 0.005
        journal.append_sync([sig("k", 99)])
        assert journal.fsync_count == 0
        synced.clear()
        clock.now += 0.006  # now 11 ms since the last fsync: the idle timer must fire
        assert synced.wait(5)
        assert journal.fsync_count == 1
        journal.append_sync([sig("k", 100)])
        assert journal.fsync_count == 1  # the next one is at least 10 ms away
        clock.now += 0.010
        journal.append_sync([sig("k", 101)])  # due: fsynced before it returns
        assert journal.fsync_count == 2


def test_never_policy_fsyncs_only_on_flush_and_close(tmp_path: Path) -> None:
    fsync = CountingFsync()
    journal = Journal.open(tmp_path, JournalConfig(fsync=FsyncPolicy.NEVER), fsync=fsync)
    for i in range(50):
        journal.append_sync([sig("k", i)])
    assert journal.fsync_count == 0
    journal.flush()
    assert journal.fsync_count == 1
    journal.append_sync([sig("k", 50)])
    journal.close()
    assert journal.fsync_count == 2
    assert len(all_records(tmp_path)) == 51


def test_always_policy_fsyncs_before_acknowledging(tmp_path: Path) -> None:
    with Journal.open(tmp_path, fsync=CountingFsync()) as journal:
        for i in range(10):
            before = journal.fsync_count
            journal.append_sync([sig("k", i)])  # one appender: every ack needs its own fsync
            assert journal.fsync_count == before + 1


def test_directory_lock_and_closed_journal(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path)
    with pytest.raises(JournalError, match="in use"):
        Journal.open(tmp_path)
    journal.close()
    journal.close()  # idempotent
    with pytest.raises(JournalClosedError):
        journal.submit([reg("late")])
    Journal.open(tmp_path).close()


def test_fsync_failure_fails_waiters_and_later_appends(tmp_path: Path) -> None:
    calls = []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) > 1:  # the first call is the new segment's directory fsync
            raise OSError(5, "EIO")

    journal = Journal.open(tmp_path, fsync=failing)
    try:
        future: Future[int] = journal.submit([reg("a")])
        with pytest.raises(JournalFailedError):
            future.result(10)
        with pytest.raises(JournalFailedError):
            journal.submit([reg("b")])
    finally:
        journal.close()


def test_invalid_records_are_rejected_at_submit(tmp_path: Path) -> None:
    with Journal.open(tmp_path) as journal:
        with pytest.raises(ValueError, match="no record"):
            journal.submit([JournalRecord()])
        with pytest.raises(ValueError, match="non-final"):
            journal.submit([out("a", 1, State.STATE_WATCHING)])
        with pytest.raises(ValueError, match="nothing"):
            journal.submit([])
        with pytest.raises(ValueError, match="outside"):
            journal.submit([reg("huge", payload=b"x" * (64 * 1024 * 1024))])
        assert journal.append_sync([reg("ok")]) == 0
