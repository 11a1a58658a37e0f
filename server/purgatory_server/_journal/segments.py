"""Segment files: naming, listing and reading one segment's records.

Reading a segment is side-effect free; deciding what a bad frame means (torn tail or
corruption) is recovery's job.

Naming: ``<base_index as 20 decimal digits, zero-padded>.seg``, where ``base_index`` is the
journal index of the segment's first record (the header repeats it). Sorting names sorts
segments by index. Other files in the directory are not segments (the ``LOCK`` file, the
``START`` file, and ``*.dropped`` / ``*.corrupt-*`` files that ``repair`` sets aside).
:func:`lock_directory` takes the ``LOCK`` file, so two journals never write one directory.
``START`` holds the journal's first index in decimal once compaction (or ``repair``) has
moved it above 0 (:func:`write_start`; recovery's contiguity check reads it).
"""

from __future__ import annotations

import fcntl
import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from purgatory_server._journal.framing import (
    _FRAME,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    MAX_RECORD_BYTES,
    FrameError,
    decode_frame,
    decode_header,
)
from purgatory_server._journal.journal_errors import JournalError

SEGMENT_SUFFIX = ".seg"
START_FILE = "START"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.seg$")


def lock_directory(directory: Path) -> int:
    """Take ``directory``'s ``LOCK`` file (an flock, released when the fd is closed or the
    process dies); the fd. Raises :class:`JournalError` if another journal holds it."""
    lock_fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        raise JournalError(f"journal directory {directory} is in use by another journal") from None
    return lock_fd


def read_start(directory: Path) -> int:
    """The index ``START`` records (0 without one). Raises :class:`JournalError` for a
    ``START`` that is not a decimal index."""
    try:
        text = (directory / START_FILE).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalError(f"cannot read {directory / START_FILE}: {exc}") from exc
    if not text.isdigit():
        raise JournalError(f"{directory / START_FILE} holds {text[:40]!r}, not an index")
    return int(text)


def write_start(directory: Path, index: int, fsync: Callable[[int], None]) -> None:
    """Record ``index`` as the journal's first, atomically (temporary file, fsync, rename,
    directory fsync)."""
    tmp = directory / (START_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = memoryview(f"{index}\n".encode("ascii"))
        while data:
            data = data[os.write(fd, data) :]
        fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / START_FILE)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def segment_name(base_index: int) -> str:
    """File name of the segment whose first record has index ``base_index``."""
    return f"{base_index:020d}{SEGMENT_SUFFIX}"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """``(base_index, path)`` of every segment file in ``directory``, oldest first."""
    found = []
    for path in directory.iterdir():
        match = _SEGMENT_NAME.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    found.sort()
    return found


@dataclass(slots=True)
class SegmentMeta:
    """What the writer tracks about one segment: its records are ``[base, base+count)``."""

    base: int
    path: Path
    size: int
    count: int

    @property
    def end_index(self) -> int:
        """Index one past the segment's last record."""
        return self.base + self.count


class SegmentScan:
    """Iterate the valid records of one segment's bytes; afterwards, say where it stopped.

    Iterating yields ``(offset, payload)``. When it stops, ``valid_end`` is the offset just
    past the last whole, CRC-valid record and ``error`` is None if that is the end of the
    data, else the reason the frame at ``valid_end`` was rejected. A bad header is reported
    the same way with ``valid_end == 0``; ``base_index`` is None then.
    """

    def __init__(self, path: Path, data: bytes) -> None:
        self.path = path
        self.data = memoryview(data)
        self.valid_end = 0
        self.error: str | None = None
        self.base_index: int | None = None
        try:
            self.base_index = decode_header(self.data)
            self.valid_end = HEADER_BYTES
        except FrameError as exc:
            self.error = exc.reason

    @classmethod
    def read(cls, path: Path) -> SegmentScan:
        """Read the whole file (segments are bounded by ``segment_bytes``)."""
        return cls(path, path.read_bytes())

    def __iter__(self) -> Iterator[tuple[int, memoryview]]:
        if self.base_index is None:
            return
        data = self.data
        offset = self.valid_end
        end_of_data = len(data)
        # decode_frame's checks, inlined: this loop runs once per record at start-up.
        unpack = _FRAME.unpack_from
        crc32 = zlib.crc32
        while offset < end_of_data:
            if end_of_data - offset >= FRAME_OVERHEAD:
                crc, length = unpack(data, offset)
                end = offset + FRAME_OVERHEAD + length
                if (
                    0 < length <= MAX_RECORD_BYTES
                    and end <= end_of_data
                    and crc32(data[offset + 4 : end]) == crc
                ):
                    yield offset, data[offset + FRAME_OVERHEAD : end]
                    offset = self.valid_end = end
                    continue
            try:  # not a valid frame: let decode_frame say why
                decode_frame(data, offset)
            except FrameError as exc:
                self.error = exc.reason
                return
            raise AssertionError("decode_frame accepted a frame the fast path refused")
