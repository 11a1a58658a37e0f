"""Reading one journal segment's frames, with the server's torn-tail rule (docs/journal.md §2, §7).

Why our own copy of the framing and not ``purgatory_server._journal``: the pipeline runs on
Spark workers that need not have the server installed, and docs/journal.md is written so
that an independent reader can parse the files; this module is that reader. The rules
mirror recovery exactly, because a count of torn records that differs from what the
server dropped at start-up would be a wrong answer:

- An invalid frame (or header) in the **last** segment of a journal, with no valid frame
  starting at any later byte offset, is a torn tail: skipped and counted (its bytes).
- Any other invalid frame, a CRC-valid record that does not parse, a header whose index
  differs from the file name (unless torn), or a gap between segments is corruption:
  :class:`~purgatory_pipeline.errors.JournalCorruptionError` naming the file and offset.

Pure functions over bytes; nothing here does I/O, so it is safe on any worker.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from purgatory_pipeline.errors import (
    JournalCorruptionError,
    NewerFormatError,
    NotAJournalError,
)

MAGIC: Final = b"PGJRNL\r\n"
VERSION: Final = 1
HEADER_BYTES: Final = 24
FRAME_OVERHEAD: Final = 8
MAX_RECORD_BYTES: Final = 64 * 1024 * 1024
SEGMENT_NAME: Final = re.compile(r"^(\d{20})\.seg$")
_HEADER = struct.Struct("<8sHHQI")
_FRAME = struct.Struct("<II")


def segment_base(name: str) -> int | None:
    """The base index a segment file name encodes, or None if the name is not a segment's."""
    match = SEGMENT_NAME.match(name)
    return int(match.group(1)) if match else None


def _frame_end(data: memoryview, offset: int) -> int | None:
    """End offset of the valid frame at ``offset``, or None if there is none."""
    if len(data) - offset < FRAME_OVERHEAD:
        return None
    crc, length = _FRAME.unpack_from(data, offset)
    end: int = offset + FRAME_OVERHEAD + length
    if length == 0 or length > MAX_RECORD_BYTES or end > len(data):
        return None
    if zlib.crc32(data[offset + 4 : end]) != crc:
        return None
    return end


def complete_frames(data: memoryview) -> tuple[int, int]:
    """``(bytes, frames)``: the valid frames ``data`` starts with, up to the first that is not
    (the streaming source's walk of a growing head segment, from where it last stopped)."""
    at, frames = 0, 0
    while (end := _frame_end(data, at)) is not None:
        at, frames = end, frames + 1
    return at, frames


def _valid_frame_after(data: memoryview, start: int) -> bool:
    """Whether a valid frame starts at some offset >= ``start`` (recovery's torn-tail test)."""
    return any(_frame_end(data, offset) is not None for offset in range(start, len(data) - 7))


@dataclass(slots=True)
class TornTail:
    """What the torn-tail rule skipped: bytes from ``offset`` to the end of the file."""

    offset: int
    dropped_bytes: int
    reason: str


class SegmentReader:
    """Iterate ``(index, byte_offset, payload)`` over one segment's valid frames.

    ``is_last`` says whether this is the journal's head segment (only there can a tail be
    torn). ``next_base`` is the next segment's base index, checked against this segment's
    end so a missing segment is reported, as recovery does. After iteration ``torn`` holds
    the skipped tail, if any, and ``records`` the number of frames yielded.

    ``start``/``stop``: yield only the frames that start in ``[start, stop)`` (a piece of
    the segment; ``stop`` None is the end, and only that piece checks the next segment's
    base). Frames before ``start`` are still walked and checked, since a frame's index and
    offset are known only by walking from the header; a bad frame there belongs to the
    piece that owns its offset, which reports it, so this piece stops quietly. Every frame
    is owned by exactly one piece, so the pieces together yield what one reader would.
    """

    def __init__(
        self,
        path: str,
        data: bytes,
        *,
        is_last: bool,
        next_base: int | None = None,
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        self.path = path
        self.data = memoryview(data)
        self.is_last = is_last
        self.next_base = next_base
        self.start = start
        self.stop = stop
        self.torn: TornTail | None = None
        self.records = 0
        self.name_base = segment_base(path.rsplit("/", 1)[-1])

    def _header(self) -> int | str:
        """The base index, or why the header is invalid (torn or corrupt, by position)."""
        data = self.data
        if self.name_base is None and bytes(data[:8]) != MAGIC:
            # A file given by path that is not named like a segment and does not start
            # like one: not a journal (a named segment's bad header is torn or corrupt).
            raise NotAJournalError(f"{self.path} is not a journal segment (no segment header)")
        if len(data) < HEADER_BYTES:
            return f"header is {len(data)} bytes, need {HEADER_BYTES}"
        magic, version, _flags, base, crc = _HEADER.unpack_from(data, 0)
        if zlib.crc32(data[:20]) != crc:
            return "header CRC mismatch"
        if magic != MAGIC:
            raise NotAJournalError(f"{self.path} is not a journal segment (bad magic)")
        if version > VERSION:
            raise NewerFormatError(
                f"{self.path} was written in journal format version {version}; "
                f"this pipeline reads version {VERSION} (upgrade purgatory-pipeline)"
            )
        if version != VERSION:
            return f"unsupported segment version {version}"
        if self.name_base is not None and base != self.name_base:
            return f"header base {base} != file name"
        return int(base)

    def _fail_or_tear(self, at: int, reason: str) -> None:
        if self.is_last and not _valid_frame_after(self.data, max(at + 1, HEADER_BYTES)):
            dropped = len(self.data) if at < HEADER_BYTES else len(self.data) - at
            self.torn = TornTail(at if at >= HEADER_BYTES else 0, dropped, reason)
            return
        raise JournalCorruptionError(self.path, at, reason)

    def __iter__(self) -> Iterator[tuple[int, int, memoryview]]:
        header = self._header()
        if isinstance(header, str):
            if self.start == 0:
                self._fail_or_tear(0, header)
                self._check_contiguous(self.name_base or 0)
            return
        data, offset, index, size = self.data, HEADER_BYTES, header, len(self.data)
        start, stop = self.start, size if self.stop is None else min(self.stop, size)
        unpack, crc32 = _FRAME.unpack_from, zlib.crc32
        while offset < stop:
            reason = None
            if size - offset < FRAME_OVERHEAD:
                reason = f"{size - offset} bytes left, a frame needs at least {FRAME_OVERHEAD}"
            else:
                crc, length = unpack(data, offset)
                end = offset + FRAME_OVERHEAD + length
                if length == 0 or length > MAX_RECORD_BYTES:
                    reason = f"record length {length} out of range"
                elif end > size:
                    reason = f"record of {length} bytes runs {end - size} bytes past the end"
                elif crc32(data[offset + 4 : end]) != crc:
                    reason = "record CRC mismatch"
            if reason is not None:
                if offset < start:
                    return  # the piece that owns this offset reports it
                self._fail_or_tear(offset, reason)
                break
            if offset >= start:
                yield index, offset, data[offset + FRAME_OVERHEAD : end]
                self.records += 1
            index += 1
            offset = end
        if self.stop is None:
            self._check_contiguous(index)

    def _check_contiguous(self, end_index: int) -> None:
        if self.next_base is not None and self.next_base != end_index:
            raise JournalCorruptionError(
                self.path,
                len(self.data),
                f"the next segment starts at index {self.next_base}, expected {end_index}",
            )

    def unparsable(self, index: int, offset: int) -> JournalCorruptionError:
        """The error for a CRC-valid record that does not parse (never a torn tail)."""
        return JournalCorruptionError(
            self.path, offset, f"record {index} has a valid CRC but does not parse"
        )
