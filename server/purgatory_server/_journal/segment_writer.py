"""The journal's files: the segment list, the head segment's descriptor, the next index.

:class:`~.journal.Journal` decides *when* to write, fsync, roll and compact; this class
knows *how*. Each frame is applied to the :class:`~.state.JournalState` mirror as it is
added; :meth:`SegmentWriter.write_pending` then writes what was added, so once it returns
the mirror matches the file exactly.

Out of space (``ENOSPC``, ``EDQUOT``) is capacity that frees up, not a failure: a write or a
segment creation that fails for space is undone (the head is truncated back to its last
whole record, a half-made segment file is removed), the unwritten frames and rolls stay
queued in order, and :class:`~.journal_errors.JournalNoSpaceError` says so; the next
:meth:`~SegmentWriter.write_pending` starts again from the first of them. Every other
``OSError`` (``EIO``, any fsync failure) propagates: the journal cannot go on safely.

Thread-safety: every method runs on the journal's writer thread, except
:meth:`SegmentWriter.segment_list`, which any thread may call. The segment list is
changed and copied under ``lock`` (the journal's condition) for it; ``dirty`` and
``last_fsync`` are read without it by the fsync policy (a stale read only moves an
interval fsync by one wake-up).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.framing import FRAME_OVERHEAD, HEADER_BYTES, encode_header
from purgatory_server._journal.journal_errors import JournalNoSpaceError
from purgatory_server._journal.recovery import fsync_directory
from purgatory_server._journal.segments import SegmentMeta, segment_name, write_start
from purgatory_server._journal.state import JournalState

__all__ = ["NO_SPACE_ERRNOS", "SegmentWriter"]

# The errors of a write that more free space would let through.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class SegmentWriter:
    """Appends frames to the head segment, rolls it at ``segment_bytes``, fsyncs it."""

    def __init__(
        self,
        *,
        directory: Path,
        segment_bytes: int,
        state: JournalState,
        segments: Sequence[SegmentMeta],
        next_index: int,
        fsync: Callable[[int], None],
        clock: Callable[[], float],
        lock: threading.Condition,
        write: Callable[[int, memoryview], int] = os.write,
    ) -> None:
        self.directory = directory
        self.next_index = next_index
        self.fsync_count = 0
        self.records_written = 0
        self.bytes_written = 0
        # Called on the writer thread after each fsync with its duration in seconds and
        # the records it made durable (its group size); see Journal.add_fsync_listener.
        self.fsync_listeners: list[Callable[[float, int], None]] = []
        self.dirty = False
        self.last_fsync = clock()
        # Set when a roll seals a segment: only then can compaction free one.
        self.sealed = False
        self._segment_bytes = segment_bytes
        self._state = state
        self._segments = list(segments)
        self._fsync_fn = fsync
        self._write_fn = write
        self._clock = clock
        self._lock = lock
        self._synced_records = 0
        # Added, not yet written: runs of frames (lists) and rolls (the new segment's base
        # index), in order. Empty between batches unless a write ran out of space.
        self._pending: list[list[bytes] | int] = []
        self._run: list[bytes] | None = None  # the last run of _pending, frames go there
        if self._segments:
            self._head_path = self._segments[-1].path
            self._fd = os.open(self._head_path, os.O_WRONLY | os.O_APPEND)
            self._head_end = self._segments[-1].size  # bytes of the head really on disk
        else:
            self._fd = -1
            self._create_segment(next_index)
            with self._lock:
                self._segments.append(SegmentMeta(next_index, self._head_path, HEADER_BYTES, 0))

    @property
    def segments(self) -> list[SegmentMeta]:
        """The live list, oldest first (writer thread only; others: :meth:`segment_list`)."""
        return self._segments

    def segment_list(self) -> list[SegmentMeta]:
        """A copy of the segment list (any thread; approximate while writing)."""
        with self._lock:
            return [SegmentMeta(s.base, s.path, s.size, s.count) for s in self._segments]

    @property
    def pending(self) -> bool:
        """Whether frames or rolls were added and are not written yet."""
        return bool(self._pending)

    def add_frame(self, record: JournalRecord | None, frame: bytes) -> None:
        """Add ``frame`` after the head's last (rolling first if the head is full) and apply
        it to the mirror; :meth:`write_pending` writes it."""
        head = self._segments[-1]
        run = self._run
        if head.count > 0 and head.size + len(frame) > self._segment_bytes:
            self._pending.append(self.next_index)
            with self._lock:
                head = SegmentMeta(self.next_index, self._path(self.next_index), HEADER_BYTES, 0)
                self._segments.append(head)
            run = None
        if run is None:
            run = self._run = []
            self._pending.append(run)
        run.append(frame)
        head.size += len(frame)
        head.count += 1
        # The state keeps a registration's bytes (sliced from the frame), not the message.
        self._state.apply_raw(self.next_index, memoryview(frame)[FRAME_OVERHEAD:], record)
        self.next_index += 1

    def write_pending(self) -> None:
        """Write every added frame and make every roll, in order (see the module
        docstring for what a failure leaves). Raises :class:`JournalNoSpaceError` when out
        of space, and the ``OSError`` of any other failure."""
        pending = self._pending
        done = 0
        self._run = None
        try:
            for item in pending:
                if isinstance(item, int):
                    self._roll(item)
                else:
                    self._write_run(item)
                done += 1
        finally:
            del pending[:done]

    def _write_run(self, frames: list[bytes]) -> None:
        data = b"".join(frames)
        view = memoryview(data)
        try:
            while view:
                written = self._write_fn(self._fd, view)
                view = view[written:]
        except OSError as exc:
            if exc.errno not in NO_SPACE_ERRNOS:
                raise
            os.ftruncate(self._fd, self._head_end)  # no torn record left behind
            raise JournalNoSpaceError(self._head_path, exc) from exc
        self._head_end += len(data)
        self.dirty = True
        self.records_written += len(frames)
        self.bytes_written += len(data)

    def fsync_head(self) -> None:
        if self._fd < 0:  # a roll ran out of space: the sealed head was fsynced
            return
        listeners = self.fsync_listeners
        if not listeners:
            self._fsync_fn(self._fd)
        else:
            started = time.perf_counter()
            self._fsync_fn(self._fd)
            took, records = (
                time.perf_counter() - started,
                self.records_written - self._synced_records,
            )
            for listener in listeners:
                listener(took, records)
        self._synced_records = self.records_written
        self.fsync_count += 1
        self.dirty = False
        self.last_fsync = self._clock()

    def record_start(self, index: int) -> None:
        """Record ``index`` as the journal's first (``START``), before compaction deletes
        the segments below it."""
        write_start(self.directory, index, self._fsync_fn)

    def delete(self, segment: SegmentMeta) -> None:
        """Unlink a segment compaction emptied, durably (the directory is fsynced)."""
        segment.path.unlink()
        fsync_directory(self.directory, self._fsync_fn)
        with self._lock:
            self._segments.remove(segment)

    def close(self) -> None:
        """Close the head's descriptor (idempotent); nothing is fsynced here."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _path(self, base: int) -> Path:
        return self.directory / segment_name(base)

    def _create_segment(self, base: int) -> None:
        """Create the segment starting at ``base`` and make it the head's descriptor; out
        of space, the half-made file is removed."""
        path = self._path(base)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except OSError as exc:  # no room for a directory entry or an inode
            if exc.errno not in NO_SPACE_ERRNOS:
                raise
            raise JournalNoSpaceError(path, exc) from exc
        try:
            header = memoryview(encode_header(base))
            while header:
                header = header[self._write_fn(fd, header) :]
        except OSError as exc:
            os.close(fd)
            if exc.errno not in NO_SPACE_ERRNOS:
                raise
            path.unlink()
            raise JournalNoSpaceError(path, exc) from exc
        self._fd = fd
        self._head_path = path
        self._head_end = HEADER_BYTES
        fsync_directory(self.directory, self._fsync_fn)

    def _roll(self, base: int) -> None:
        """Seal the head (fsync, under every policy) and start the segment at ``base``.
        Idempotent once the head is sealed (a roll retried after running out of space)."""
        if self._fd >= 0:
            self.fsync_head()
            os.close(self._fd)
            self._fd = -1
        self._create_segment(base)
        self.dirty = True  # the new header is not fsynced yet
        self.sealed = True
