"""The journal: open (recover), append under an fsync policy, compact, close.

One writer thread drains a queue: appends land in one order, and everything queued while
it wrote or fsynced is its next batch (group commit); callers wait on a future. The same
thread applies each record to the :class:`JournalState` mirror and runs compaction, so the
mirror matches the file exactly and compaction needs no locks against appends. That
thread is one of a :class:`~.writers.WriterPool` shared by every journal opened on it
(``writers``), or a private one.

Out of space: a write that fails for space (``ENOSPC``, ``EDQUOT``) is undone and kept
(:mod:`.segment_writer`); the writer then waits for more submissions or
``JournalConfig.space_retry_ms`` and writes again, so the journal resumes by itself once
space is back. Meanwhile :attr:`Journal.no_space` says why it is stalled, submissions are
still accepted (queued behind the unwritten ones, in order) and their futures resolve
once written; flush and compaction requests wait likewise. Closing while still out of
space fails what is unwritten with :class:`JournalFailedError`. Any other ``OSError``
(``EIO``, every fsync failure) fails the journal for good.

Ordering guarantee: records reach the file in the order :meth:`Journal.submit` was called
(across threads, the order in which calls took the journal's queue lock), and each
submission's records are contiguous. The server must submit in the order it applies
state changes, e.g. submit while holding the lock that orders them, then wait for the
future outside it.

Thread-safety: ``submit``, ``append_sync``, ``append``, ``flush``, ``compact`` and ``close``
may be called from any thread (``append`` from a running event loop). Records passed in
belong to the journal from then on and must not be mutated.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.compaction import CompactionResult, run_compaction
from purgatory_server._journal.framing import encode_frame
from purgatory_server._journal.journal_errors import (
    JournalClosedError,
    JournalError,
    JournalFailedError,
    JournalNoSpaceError,
)
from purgatory_server._journal.options import FsyncPolicy, JournalConfig
from purgatory_server._journal.recovery import RecoveryReport, recover
from purgatory_server._journal.segment_writer import SegmentWriter
from purgatory_server._journal.segments import SegmentMeta, lock_directory
from purgatory_server._journal.state import JournalState, RecoveredState
from purgatory_server._journal.writers import WriterPool

log = logging.getLogger(__name__)

_TERMINAL = frozenset(
    {
        JournalRecord.Outcome.STATE_COMPLETED,
        JournalRecord.Outcome.STATE_EXPIRED,
        JournalRecord.Outcome.STATE_FORCE_COMPLETED,
        JournalRecord.Outcome.STATE_CANCELLED,
    }
)


def _validate(record: JournalRecord) -> None:
    kind = record.WhichOneof("record")
    if kind is None:
        raise ValueError("JournalRecord has no record set")
    if kind == "outcome" and record.outcome.state not in _TERMINAL:
        raise ValueError(f"outcome of {record.outcome.operation_id!r} has a non-final state")


@dataclass(slots=True)
class _Submission:
    records: Sequence[JournalRecord]
    frames: list[bytes]
    future: Future[int]


@dataclass(slots=True)
class _Request:
    kind: str  # "flush" | "compact"
    force: bool
    future: Future[Any]


class Journal:
    """A write-ahead journal in one directory. Create with :meth:`Journal.open`."""

    def __init__(
        self,
        *,
        directory: Path,
        config: JournalConfig,
        state: JournalState,
        report: RecoveryReport,
        lock_fd: int,
        fsync: Callable[[int], None],
        clock: Callable[[], float],
        fault: Callable[[str], None] | None,
        write: Callable[[int, memoryview], int] = os.write,
        writers: WriterPool | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        # Lazy: read by the server before it appends anything (see release_recovered).
        self.recovered: RecoveredState = state.snapshot(report.next_index, lazy=True)
        self.report = report
        self.compactions = 0
        self._state = state
        self._lock_fd = lock_fd
        self._clock = clock
        self._fault = fault
        self._cond = threading.Condition()
        self._queue: list[_Submission] = []
        self._requests: list[_Request] = []
        self._closing = False
        self._failure: BaseException | None = None
        # Futures the writer thread has taken off the queue and not yet resolved.
        self._in_flight: list[Future[Any]] = []
        # Out of space: the submissions added but not written (future, first index), the
        # requests waiting behind them, and why (any thread reads no_space).
        self._unwritten: list[tuple[Future[int], int]] = []
        self._held: list[_Request] = []
        self.no_space: str | None = None
        self._files = SegmentWriter(
            directory=directory,
            segment_bytes=config.segment_bytes,
            state=state,
            segments=report.segments,
            next_index=report.next_index,
            fsync=fsync,
            clock=clock,
            lock=self._cond,
            write=write,
        )
        # Set by the writer thread once this journal is closed and drained, or failed.
        self._stopped = threading.Event()
        pool = writers if writers is not None else WriterPool(1, f"journal-writer-{directory.name}")
        self._writer = pool.assign(self)

    @property
    def fsync_count(self) -> int:
        return self._files.fsync_count

    @property
    def records_written(self) -> int:
        return self._files.records_written

    @property
    def bytes_written(self) -> int:
        return self._files.bytes_written

    def add_fsync_listener(self, listener: Callable[[float, int], None]) -> None:
        """Call ``listener`` on the writer thread after each fsync with its duration in
        seconds and the records it made durable (its group size). Add listeners before
        the first append: the list is read without a lock."""
        self._files.fsync_listeners.append(listener)

    def release_recovered(self) -> None:
        """Forget the start-up snapshot's pending operations once the reader has them.

        ``recovered.pending`` is a :class:`~.state.PendingView` over the state at opening:
        read it before the first append, then release it. The rest of ``recovered`` stays.
        """
        self.recovered = replace(self.recovered, pending={})

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: JournalConfig | None = None,
        *,
        repair: bool = False,
        fsync: Callable[[int], None] = os.fsync,
        clock: Callable[[], float] = time.monotonic,
        writers: WriterPool | None = None,
        _fault: Callable[[str], None] | None = None,
        _write: Callable[[int, memoryview], int] = os.write,
    ) -> Journal:
        """Recover the journal in ``directory`` (created if missing) and start its writer.

        ``journal.recovered`` is the state the records on disk imply. Raises
        :class:`JournalCorruptionError` for damage other than a torn tail unless
        ``repair``, and :class:`JournalError` if another journal holds the directory.
        ``writers`` is the pool whose thread writes it (None: a thread of its own).
        ``fsync`` and ``clock`` (monotonic seconds) are injectable for tests; ``_fault``
        is a test hook called at named points of compaction (it may raise OSError to
        simulate a crash there); ``_write`` (``os.write``'s signature) lets a test make
        writes run out of space.
        """
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        config = config or JournalConfig()
        lock_fd = lock_directory(path)
        # Recovery allocates many long-lived objects and no cycles: the cyclic GC is waste.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            state = JournalState(
                config.retain_events,
                config.max_key_values,
                (config.dedup_window_ms, config.dedup_max_bytes),
            )
            state.track_due_times()  # for the start-up snapshot (released in __init__)
            report = recover(path, raw_sink=state.apply_raw, repair=repair, fsync=fsync)
            journal = cls(
                directory=path,
                config=config,
                state=state,
                report=report,
                lock_fd=lock_fd,
                fsync=fsync,
                clock=clock,
                fault=_fault,
                write=_write,
                writers=writers,
            )
        except BaseException:
            os.close(lock_fd)
            raise
        finally:
            if gc_was_enabled:
                gc.enable()
        return journal

    # -- public API (any thread) ---------------------------------------------------------

    def submit(self, records: Sequence[JournalRecord]) -> Future[int]:
        """Queue ``records`` and return a future of the first one's journal index.

        Fixes the records' place in the journal order now, without blocking on I/O. The
        future resolves when they are durable under the fsync policy, or fails with
        :class:`JournalFailedError`. Raises ValueError for an invalid or oversized record.
        """
        if not records:
            raise ValueError("nothing to append")
        for record in records:
            _validate(record)
        frames = [encode_frame(record.SerializeToString()) for record in records]
        future: Future[int] = Future()
        future.set_running_or_notify_cancel()  # a waiter's cancel must not un-queue it
        with self._cond:
            self._check_open()
            self._queue.append(_Submission(records, frames, future))
        self._writer.wake(self)
        return future

    def append_sync(self, records: Sequence[JournalRecord], timeout: float | None = None) -> int:
        """Append and block until durable under the policy; returns the first index."""
        return self.submit(records).result(timeout)

    async def append(self, records: Sequence[JournalRecord]) -> int:
        """Append and wait (without blocking the loop) until durable; the first index.

        Cancelling the awaiting task does not withdraw the records: their place in the
        journal was fixed when this was called.
        """
        return await asyncio.wrap_future(self.submit(records))

    def flush(self, timeout: float | None = None) -> None:
        """fsync everything appended so far (useful under ``interval``/``never``)."""
        self._request("flush", False).result(timeout)

    def compact(self, *, force: bool = False, timeout: float | None = None) -> CompactionResult:
        """Run retention/compaction now. ``force`` ignores the carry-ratio threshold."""
        result: CompactionResult = self._request("compact", force).result(timeout)
        return result

    def segments(self) -> list[SegmentMeta]:
        """A copy of the current segment list, oldest first (approximate while writing)."""
        return self._files.segment_list()

    def close(self, timeout: float | None = 30.0) -> None:
        """Write what is queued, fsync, stop the writer and release the directory.

        Idempotent. After a failure it only releases resources.
        """
        with self._cond:
            self._closing = True
        self._writer.wake(self)
        if not self._stopped.wait(timeout):
            raise JournalError("journal writer did not stop in time")
        self._files.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals (writer thread unless noted) -----------------------------------------

    def _check_open(self) -> None:  # caller holds self._cond
        if self._failure is not None:
            raise JournalFailedError("journal failed earlier") from self._failure
        if self._closing:
            raise JournalClosedError("journal is closed")

    def _request(self, kind: str, force: bool) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        with self._cond:
            self._check_open()
            self._requests.append(_Request(kind, force, future))
        self._writer.wake(self)
        return future

    def _drain(self) -> bool:
        """One writer turn (the pool's thread calls it when woken); False once this journal
        is done: closing and drained, or failed (an OSError: no further appends)."""
        try:
            return self._step()
        except OSError as exc:
            log.exception("journal writer in %s failed; no further appends", self.directory)
            self._fail(exc)
            return False
        except BaseException as exc:
            self._fail(exc)
            raise

    def _step(self) -> bool:
        """Write what is queued, serve requests, fsync if due; False once closing and
        drained."""
        with self._cond:
            batch, self._queue = self._queue, []
            requests, self._requests = self._held + self._requests, []
            closing = self._closing
        self._held = []
        unwritten = self._unwritten
        if batch:
            firsts = self._add_submissions(batch)
            unwritten.extend(zip((s.future for s in batch), firsts, strict=True))
        self._in_flight = [f for f, _ in unwritten] + [r.future for r in requests]
        if unwritten or self._files.pending:
            if not self._write_pending(closing):
                self._held = requests
                if self._fsync_due():  # what was written before still gets its fsync
                    self._files.fsync_head()
                return True
            if self.config.fsync is FsyncPolicy.ALWAYS or self._fsync_due():
                self._files.fsync_head()
            for future, first in unwritten:
                future.set_result(first)
            unwritten.clear()
        elif self._fsync_due():
            self._files.fsync_head()
        for request in requests:
            self._serve(request)
        self._in_flight = []
        if self._files.sealed and self.config.auto_compact:
            self._files.sealed = False
            self._compact(force=False)
        if closing and not batch and not requests:
            if self._files.dirty:
                self._files.fsync_head()
            return False
        if closing:
            self._writer.wake(self)  # one more turn drains what came in before the close
        return True

    def _write_pending(self, closing: bool) -> bool:
        """Write what was added; False (and :attr:`no_space` set) while out of space.
        Closing, out of space is final: raises OSError (the journal fails)."""
        try:
            self._files.write_pending()
        except JournalNoSpaceError as exc:
            waiting = len(self._unwritten)
            if closing:
                message = f"{exc}; closed with {waiting} submissions unwritten"
                raise OSError(exc.errno, message) from exc
            if self.no_space is None:
                log.error(
                    "journal %s: %s; %d submissions wait, retrying every %d ms",
                    self.directory,
                    exc,
                    waiting,
                    self.config.space_retry_ms,
                )
            self.no_space = str(exc)
            return False
        if self.no_space is not None:
            log.warning("journal %s: space is back; writing again", self.directory)
            self.no_space = None
        return True

    def _fsync_due(self) -> bool:  # any thread; reads only
        if not self._files.dirty or self.config.fsync is not FsyncPolicy.INTERVAL:
            return False
        return self._clock() - self._files.last_fsync >= self.config.fsync_interval_ms / 1000

    def _fsync_wait(self) -> float | None:
        """Seconds until the writer is owed a turn with nothing new queued: the next
        fsync the interval policy wants, or the next write attempt while out of space;
        None: no turn owed."""
        wait = None
        if self._files.dirty and self.config.fsync is FsyncPolicy.INTERVAL:
            elapsed = self._clock() - self._files.last_fsync
            wait = max(0.0005, self.config.fsync_interval_ms / 1000 - elapsed)
        if self.no_space is not None:
            retry = self.config.space_retry_ms / 1000
            return retry if wait is None else min(wait, retry)
        return wait

    def _serve(self, request: _Request) -> None:
        if request.kind == "flush":
            self._files.fsync_head()
            request.future.set_result(None)
        else:
            request.future.set_result(self._compact(force=request.force))

    def _fail(self, exc: BaseException) -> None:
        failure = JournalFailedError(f"journal writer failed: {exc!r}")
        failure.__cause__ = exc
        with self._cond:
            self._failure = exc
            pending = [s.future for s in self._queue] + [r.future for r in self._requests]
            self._queue, self._requests = [], []
        pending.extend(self._in_flight)
        for future in pending:
            if not future.done():
                future.set_exception(failure)

    # -- writing ---------------------------------------------------------------------------

    def _add_submissions(self, batch: list[_Submission]) -> list[int]:
        """Add a batch's frames (rolling segments as needed); each submission's first
        index. :meth:`_write_pending` writes them."""
        files = self._files
        firsts = []
        for sub in batch:
            firsts.append(files.next_index)
            for record, frame in zip(sub.records, sub.frames, strict=True):
                files.add_frame(record, frame)
        return firsts

    # -- compaction --------------------------------------------------------------------------

    def _compact(self, *, force: bool) -> CompactionResult:
        try:
            result = run_compaction(
                self._files,
                self._state,
                force=force,
                max_carry_ratio=self.config.compaction_max_carry_ratio,
                hook=self._hook,
            )
        except JournalNoSpaceError as exc:  # the carry waits with the unwritten records
            self.no_space = str(exc)
            return CompactionResult(skipped_reason=str(exc))
        if result.deleted_segments:
            self.compactions += 1
        return result

    def _hook(self, point: str) -> None:
        if self._fault is not None:
            self._fault(point)
