"""The journal's files: the segment list, the head segment's descriptor, the next index.

:class:`~.journal.Journal` decides *when* to write, fsync, roll and compact; this class
knows *how*. Each frame is applied to the :class:`~.state.JournalState` mirror as it is
added, so the mirror always matches the file exactly.

Thread-safety: every method runs on the journal's writer thread, except
:meth:`SegmentWriter.segment_list`, which any thread may call. The segment list is
changed and copied under ``lock`` (the journal's condition) for it; ``dirty`` and
``last_fsync`` are read without it by the fsync policy (a stale read only moves an
interval fsync by one wake-up).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.framing import FRAME_OVERHEAD, encode_header
from purgatory_server._journal.recovery import fsync_directory
from purgatory_server._journal.segments import SegmentMeta, segment_name
from purgatory_server._journal.state import JournalState

__all__ = ["SegmentWriter"]


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
        self._clock = clock
        self._lock = lock
        self._synced_records = 0
        if self._segments:
            self._fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)
        else:
            self._fd = self._create_segment(next_index)

    @property
    def segments(self) -> list[SegmentMeta]:
        """The live list, oldest first (writer thread only; others: :meth:`segment_list`)."""
        return self._segments

    def segment_list(self) -> list[SegmentMeta]:
        """A copy of the segment list (any thread; approximate while writing)."""
        with self._lock:
            return [SegmentMeta(s.base, s.path, s.size, s.count) for s in self._segments]

    def add_frame(
        self, chunk: list[bytes], record: JournalRecord | None, frame: bytes
    ) -> list[bytes]:
        """Queue ``frame`` in ``chunk`` (written by :meth:`write`), rolling first if the
        head is full; returns the chunk to go on with (a new one after a roll)."""
        head = self._segments[-1]
        if head.count > 0 and head.size + len(frame) > self._segment_bytes:
            self.write(chunk)
            chunk = []
            self._roll()
            head = self._segments[-1]
        chunk.append(frame)
        head.size += len(frame)
        head.count += 1
        # The state keeps a registration's bytes (sliced from the frame), not the message.
        self._state.apply_raw(self.next_index, memoryview(frame)[FRAME_OVERHEAD:], record)
        self.next_index += 1
        return chunk

    def write(self, chunk: list[bytes]) -> None:
        if not chunk:
            return
        data = b"".join(chunk)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.dirty = True
        self.records_written += len(chunk)
        self.bytes_written += len(data)

    def fsync_head(self) -> None:
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

    def _create_segment(self, base: int) -> int:
        path = self.directory / segment_name(base)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        os.write(fd, encode_header(base))
        fsync_directory(self.directory, self._fsync_fn)
        with self._lock:
            self._segments.append(SegmentMeta(base, path, len(encode_header(base)), 0))
        return fd

    def _roll(self) -> None:
        """Seal the head (fsync, under every policy) and start a new segment."""
        self.fsync_head()
        os.close(self._fd)
        self._fd = -1
        self._fd = self._create_segment(self.next_index)
        self.dirty = True  # the new header is not fsynced yet
        self.sealed = True
