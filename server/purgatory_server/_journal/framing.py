"""On-disk framing: the segment header and the length-prefixed, CRC-checked record frame.

The format contract ``docs/journal.md`` specifies for outside readers; pure, no I/O.

Layout (all integers little-endian):

- Segment header, 24 bytes: ``magic`` (8 bytes, ``b"PGJRNL\\r\\n"``), ``version`` (u16,
  currently 1), ``flags`` (u16, 0), ``base_index`` (u64, journal index of the segment's
  first record), ``header_crc`` (u32, CRC-32 of the 20 bytes before it).
- Record frame: ``crc`` (u32) | ``length`` (u32) | ``payload`` (``length`` bytes, one
  serialized ``JournalRecord``). ``crc`` is CRC-32 over the 4 length bytes *and* the
  payload, i.e. over the contiguous bytes ``[offset + 4, offset + 8 + length)``.

CRC-32 is zlib's (ISO-HDLC polynomial 0x04C11DB7, the one ``zlib.crc32`` and Java's
``java.util.zip.CRC32`` compute), not CRC-32C: every standard library a reader is likely
to use has it. Covering the length field means a zero-filled region (what a file system
may leave after a crash) never parses as a frame: CRC-32 of four zero bytes is not zero. A
length of 0 is invalid (a ``JournalRecord`` with its oneof set is never empty) and so is
one above :data:`MAX_RECORD_BYTES`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Final

MAGIC: Final = b"PGJRNL\r\n"
VERSION: Final = 1
_HEADER = struct.Struct("<8sHHQ")
_HEADER_CRC = struct.Struct("<I")
HEADER_BYTES: Final = _HEADER.size + _HEADER_CRC.size  # 24
_FRAME = struct.Struct("<II")
FRAME_OVERHEAD: Final = _FRAME.size  # 8
MAX_RECORD_BYTES: Final = 64 * 1024 * 1024


class FrameError(ValueError):
    """Bytes that are not a valid header or frame; ``reason`` says which check failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encode_header(base_index: int) -> bytes:
    """The 24-byte header of a segment whose first record has index ``base_index``."""
    head = _HEADER.pack(MAGIC, VERSION, 0, base_index)
    return head + _HEADER_CRC.pack(zlib.crc32(head))


def decode_header(data: bytes | memoryview) -> int:
    """Validate a segment header and return its ``base_index``.

    Raises :class:`FrameError` when the header is short, its CRC does not match, or its
    magic or version is not one this code writes.
    """
    if len(data) < HEADER_BYTES:
        raise FrameError(f"header is {len(data)} bytes, need {HEADER_BYTES}")
    (crc,) = _HEADER_CRC.unpack_from(data, _HEADER.size)
    if zlib.crc32(data[: _HEADER.size]) != crc:
        raise FrameError("header CRC mismatch")
    magic, version, _flags, base_index = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise FrameError(f"bad magic {magic!r}")
    if version != VERSION:
        raise FrameError(f"unsupported segment version {version}")
    return int(base_index)


def encode_frame(payload: bytes) -> bytes:
    """Frame one serialized record. Raises ValueError for an empty or oversized payload."""
    n = len(payload)
    if n == 0 or n > MAX_RECORD_BYTES:
        raise ValueError(f"record payload of {n} bytes is outside 1..{MAX_RECORD_BYTES}")
    length = n.to_bytes(4, "little")
    return (zlib.crc32(payload, zlib.crc32(length))).to_bytes(4, "little") + length + payload


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: where it starts, where the next one starts, and its payload."""

    offset: int
    end: int
    payload: memoryview


def decode_frame(data: memoryview, offset: int) -> Frame:
    """Decode the frame starting at ``offset`` of ``data``.

    Raises :class:`FrameError` if fewer than 8 bytes remain, the length is out of range or
    runs past the end of ``data`` (a torn write), or the CRC does not match.
    """
    available = len(data) - offset
    if available < FRAME_OVERHEAD:
        raise FrameError(f"{available} bytes left, a frame needs at least {FRAME_OVERHEAD}")
    crc, length = _FRAME.unpack_from(data, offset)
    if length == 0 or length > MAX_RECORD_BYTES:
        raise FrameError(f"record length {length} out of range")
    end = offset + FRAME_OVERHEAD + length
    if end > len(data):
        raise FrameError(f"record of {length} bytes runs {end - len(data)} bytes past the end")
    if zlib.crc32(data[offset + 4 : end]) != crc:
        raise FrameError("record CRC mismatch")
    return Frame(offset, end, data[offset + FRAME_OVERHEAD : end])


def next_valid_frame(data: memoryview, start: int) -> int | None:
    """The first offset ``>= start`` where a valid frame begins, or None.

    Recovery uses this to tell a torn tail (nothing valid follows the bad bytes) from
    corruption in the middle (valid records follow). A random window passes the length
    and CRC checks with probability below 2**-32, so a hit is real data. Failure path only.
    """
    last = len(data) - FRAME_OVERHEAD
    for offset in range(start, last + 1):
        length = int.from_bytes(data[offset + 4 : offset + 8], "little")
        if length == 0 or offset + FRAME_OVERHEAD + length > len(data):
            continue
        try:
            decode_frame(data, offset)
        except FrameError:
            continue
        return offset
    return None
