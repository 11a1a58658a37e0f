"""The journal: open (recover), append under an fsync policy, compact, close.

Why one writer thread: appends from many threads and asyncio tasks must land in the file in
one order and, under ``always``, share fsyncs. A single thread that drains a queue gives
both: everything queued while it was writing or fsyncing becomes its next batch (group
commit), and callers just wait on a future. The same thread applies each record to the
journal's :class:`JournalState` mirror and runs compaction, so the mirror always matches
the file exactly and compaction needs no locks against appends.

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
import fcntl
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

from purgatory_server._journal.compaction import CompactionResult, plan_compaction
from purgatory_server._journal.framing import FRAME_OVERHEAD, encode_frame, encode_header
from purgatory_server._journal.journal_errors import (
    JournalClosedError,
    JournalError,
    JournalFailedError,
)
from purgatory_server._journal.options import FsyncPolicy, JournalConfig
from purgatory_server._journal.recovery import RecoveryReport, fsync_directory, recover
from purgatory_server._journal.segments import SegmentMeta, segment_name
from purgatory_server._journal.state import JournalState, RecoveredState

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
    ) -> None:
        self.directory = directory
        self.config = config
        # Lazy: read by the server before it appends anything (see release_recovered).
        self.recovered: RecoveredState = state.snapshot(report.next_index, lazy=True)
        self.report = report
        self.fsync_count = 0
        self.records_written = 0
        self.bytes_written = 0
        self.compactions = 0
        # Optional observer, called on the writer thread after each fsync with its
        # duration in seconds and the records it made durable (its group size).
        self.on_fsync: Callable[[float, int], None] | None = None
        self._synced_records = 0
        self._state = state
        self._lock_fd = lock_fd
        self._fsync_fn = fsync
        self._clock = clock
        self._fault = fault
        self._segments: list[SegmentMeta] = list(report.segments)
        self._next_index = report.next_index
        self._cond = threading.Condition()
        self._queue: list[_Submission] = []
        self._requests: list[_Request] = []
        self._closing = False
        self._failure: BaseException | None = None
        self._dirty = False
        self._last_fsync = clock()
        self._wants_compaction = False
        # Futures the writer thread has taken off the queue and not yet resolved.
        self._in_flight: list[Future[Any]] = []
        if self._segments:
            self._fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)
        else:
            self._fd = self._create_segment(self._next_index)
        self._thread = threading.Thread(
            target=self._run, name=f"journal-writer-{directory.name}", daemon=True
        )
        self._thread.start()

    def release_recovered(self) -> None:
        """Forget the start-up snapshot's pending operations once the reader has them.

        ``recovered.pending`` is a :class:`~.state.PendingView` over the journal's own
        state as it was at opening: read it before the first append, then release it
        (its table copy and due times cost about 70 bytes per pending operation).
        Everything else in ``recovered`` (events, key values, sequences) stays.
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
        _fault: Callable[[str], None] | None = None,
    ) -> Journal:
        """Recover the journal in ``directory`` (created if missing) and start its writer.

        ``journal.recovered`` is the state the records on disk imply. Raises
        :class:`JournalCorruptionError` for damage other than a torn tail unless
        ``repair``, and :class:`JournalError` if another journal holds the directory.
        ``fsync`` and ``clock`` (monotonic seconds) are injectable for tests; ``_fault``
        is a test hook called at named points of compaction (it may raise OSError to
        simulate a crash there).
        """
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        config = config or JournalConfig()
        lock_fd = os.open(path / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise JournalError(f"journal directory {path} is in use by another journal") from None
        # Recovery allocates millions of long-lived objects and no garbage cycles; letting
        # the cyclic GC rescan the growing heap meanwhile costs about a third of the time.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            state = JournalState(config.retain_events, config.max_key_values)
            state.track_due_times()  # for the start-up snapshot (released in __init__)
            report = recover(path, raw_sink=state.apply_raw, repair=repair, fsync=fsync)
            return cls(
                directory=path,
                config=config,
                state=state,
                report=report,
                lock_fd=lock_fd,
                fsync=fsync,
                clock=clock,
                fault=_fault,
            )
        except BaseException:
            os.close(lock_fd)
            raise
        finally:
            if gc_was_enabled:
                gc.enable()

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
            self._cond.notify()
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
        with self._cond:
            return [SegmentMeta(s.base, s.path, s.size, s.count) for s in self._segments]

    def close(self, timeout: float | None = 30.0) -> None:
        """Write what is queued, fsync, stop the writer and release the directory.

        Idempotent. After a failure it only releases resources.
        """
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise JournalError("journal writer did not stop in time")
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
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
            self._cond.notify()
        return future

    def _run(self) -> None:
        try:
            while self._step():
                pass
        except OSError as exc:
            log.exception("journal writer in %s failed; no further appends", self.directory)
            self._fail(exc)
        except BaseException as exc:
            self._fail(exc)
            raise

    def _step(self) -> bool:
        """One writer iteration; False once closing and drained."""
        with self._cond:
            while not (self._queue or self._requests or self._closing or self._fsync_due()):
                self._cond.wait(self._fsync_wait())
            batch, self._queue = self._queue, []
            requests, self._requests = self._requests, []
            closing = self._closing
        self._in_flight = [s.future for s in batch] + [r.future for r in requests]
        if batch:
            firsts = self._write_submissions(batch)
            if self.config.fsync is FsyncPolicy.ALWAYS or self._fsync_due():
                self._fsync_head()
            for sub, first in zip(batch, firsts, strict=True):
                sub.future.set_result(first)
        elif self._fsync_due():
            self._fsync_head()
        for request in requests:
            self._serve(request)
        self._in_flight = []
        if self._wants_compaction and self.config.auto_compact:
            self._wants_compaction = False
            self._compact(force=False)
        if closing and not batch and not requests:
            if self._dirty:
                self._fsync_head()
            return False
        return True

    def _fsync_due(self) -> bool:  # any thread; reads only
        if not self._dirty or self.config.fsync is not FsyncPolicy.INTERVAL:
            return False
        return self._clock() - self._last_fsync >= self.config.fsync_interval_ms / 1000

    def _fsync_wait(self) -> float | None:
        if not self._dirty or self.config.fsync is not FsyncPolicy.INTERVAL:
            return None
        elapsed = self._clock() - self._last_fsync
        return max(0.0005, self.config.fsync_interval_ms / 1000 - elapsed)

    def _serve(self, request: _Request) -> None:
        if request.kind == "flush":
            self._fsync_head()
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

    def _write_submissions(self, batch: list[_Submission]) -> list[int]:
        """Write a batch (rolling segments as needed); the first index of each submission."""
        firsts = []
        chunk: list[bytes] = []
        for sub in batch:
            firsts.append(self._next_index)
            for record, frame in zip(sub.records, sub.frames, strict=True):
                chunk = self._add_frame(chunk, record, frame)
        self._write(chunk)
        return firsts

    def _add_frame(
        self, chunk: list[bytes], record: JournalRecord | None, frame: bytes
    ) -> list[bytes]:
        head = self._segments[-1]
        if head.count > 0 and head.size + len(frame) > self.config.segment_bytes:
            self._write(chunk)
            chunk = []
            self._roll()
            head = self._segments[-1]
        chunk.append(frame)
        head.size += len(frame)
        head.count += 1
        # The state keeps a registration's bytes (sliced from the frame), not the message.
        self._state.apply_raw(self._next_index, memoryview(frame)[FRAME_OVERHEAD:], record)
        self._next_index += 1
        return chunk

    def _write(self, chunk: list[bytes]) -> None:
        if not chunk:
            return
        data = b"".join(chunk)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._dirty = True
        self.records_written += len(chunk)
        self.bytes_written += len(data)

    def _fsync_head(self) -> None:
        on_fsync = self.on_fsync
        if on_fsync is None:
            self._fsync_fn(self._fd)
        else:
            started = time.perf_counter()
            self._fsync_fn(self._fd)
            on_fsync(time.perf_counter() - started, self.records_written - self._synced_records)
        self._synced_records = self.records_written
        self.fsync_count += 1
        self._dirty = False
        self._last_fsync = self._clock()

    def _create_segment(self, base: int) -> int:
        path = self.directory / segment_name(base)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        os.write(fd, encode_header(base))
        fsync_directory(self.directory, self._fsync_fn)
        with self._cond:
            self._segments.append(SegmentMeta(base, path, len(encode_header(base)), 0))
        return fd

    def _roll(self) -> None:
        """Seal the head (fsync, under every policy) and start a new segment."""
        self._fsync_head()
        os.close(self._fd)
        self._fd = -1
        self._fd = self._create_segment(self._next_index)
        self._dirty = True  # the new header is not fsynced yet
        self._wants_compaction = True

    # -- compaction --------------------------------------------------------------------------

    def _compact(self, *, force: bool) -> CompactionResult:
        plan = plan_compaction(self._segments, self._state)
        if plan is None:
            return CompactionResult(skipped_reason="no deletable segment")
        try:
            frames = [encode_frame(payload) for payload in plan.records]
        except ValueError as exc:  # a carried operation larger than a record may be
            log.warning("journal compaction skipped: %s", exc)
            return CompactionResult(skipped_reason=str(exc))
        carried_bytes = sum(len(f) for f in frames)
        limit = self.config.compaction_max_carry_ratio * plan.freed_bytes
        if not force and carried_bytes > limit:
            return CompactionResult(
                carried_bytes=carried_bytes,
                skipped_reason=f"carry {carried_bytes} B > {limit:.0f} B allowed",
            )
        chunk: list[bytes] = []
        for frame in frames:
            chunk = self._add_frame(chunk, None, frame)
        self._write(chunk)
        self._fsync_head()
        self._wants_compaction = False  # rolls caused by the carry need no new pass
        self._hook("compaction:carried")
        for seg in plan.doomed:
            seg.path.unlink()
            fsync_directory(self.directory, self._fsync_fn)
            with self._cond:
                self._segments.remove(seg)
            self._hook(f"compaction:deleted:{seg.path.name}")
        self._state.forget_ended_before(plan.cutoff)
        self.compactions += 1
        log.info(
            "journal compaction in %s: deleted %d segments (%d B), carried %d ops, %d keys",
            self.directory,
            len(plan.doomed),
            plan.freed_bytes,
            plan.carried_operations,
            plan.carried_keys,
        )
        return CompactionResult(
            deleted_segments=len(plan.doomed),
            freed_bytes=plan.freed_bytes,
            carried_operations=plan.carried_operations,
            carried_keys=plan.carried_keys,
            carried_bytes=carried_bytes,
        )

    def _hook(self, point: str) -> None:
        if self._fault is not None:
            self._fault(point)
