"""Framing and CRC: the byte-level contract of docs/journal.md."""

from __future__ import annotations

import struct
import zlib

import pytest
from purgatory_server._journal.framing import (
    FRAME_OVERHEAD,
    HEADER_BYTES,
    MAGIC,
    MAX_RECORD_BYTES,
    FrameError,
    decode_frame,
    decode_header,
    encode_frame,
    encode_header,
    next_valid_frame,
)


def test_header_round_trip_and_layout() -> None:
    header = encode_header(123_456)
    assert len(header) == HEADER_BYTES == 24
    assert header[:8] == MAGIC
    magic, version, flags, base = struct.unpack_from("<8sHHQ", header)
    assert (magic, version, flags, base) == (MAGIC, 1, 0, 123_456)
    assert struct.unpack_from("<I", header, 20)[0] == zlib.crc32(header[:20])
    assert decode_header(header) == 123_456


@pytest.mark.parametrize("position", range(HEADER_BYTES))
def test_header_rejects_any_flipped_byte(position: int) -> None:
    header = bytearray(encode_header(7))
    header[position] ^= 0x40
    with pytest.raises(FrameError):
        decode_header(bytes(header))


def test_header_rejects_short_and_unknown_version() -> None:
    with pytest.raises(FrameError, match="header is 10 bytes"):
        decode_header(encode_header(1)[:10])
    head = struct.pack("<8sHHQ", MAGIC, 2, 0, 0)
    with pytest.raises(FrameError, match="version 2"):
        decode_header(head + struct.pack("<I", zlib.crc32(head)))


def test_frame_layout_crc_covers_length_and_payload() -> None:
    payload = b"hello journal"
    frame = encode_frame(payload)
    assert len(frame) == FRAME_OVERHEAD + len(payload)
    crc, length = struct.unpack_from("<II", frame)
    assert length == len(payload)
    assert crc == zlib.crc32(frame[4:])
    decoded = decode_frame(memoryview(frame), 0)
    assert (decoded.offset, decoded.end, bytes(decoded.payload)) == (0, len(frame), payload)


def test_every_single_bit_flip_is_detected() -> None:
    frame = encode_frame(b"\x12\x05abcde")
    for bit in range(len(frame) * 8):
        damaged = bytearray(frame)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(FrameError):
            decode_frame(memoryview(bytes(damaged)), 0)


def test_zero_filled_bytes_are_not_a_frame() -> None:
    with pytest.raises(FrameError, match="length 0"):
        decode_frame(memoryview(bytes(64)), 0)
    assert next_valid_frame(memoryview(bytes(4096)), 0) is None


def test_torn_frame_reports_running_past_the_end() -> None:
    frame = encode_frame(b"x" * 100)
    for cut in range(len(frame)):
        with pytest.raises(FrameError):
            decode_frame(memoryview(frame[:cut]), 0)


def test_payload_size_bounds() -> None:
    with pytest.raises(ValueError, match="outside"):
        encode_frame(b"")
    huge = struct.pack("<II", 0, MAX_RECORD_BYTES + 1)
    with pytest.raises(FrameError, match="out of range"):
        decode_frame(memoryview(huge), 0)


def test_next_valid_frame_finds_a_frame_after_garbage() -> None:
    good = encode_frame(b"payload-2")
    data = b"\xff" * 13 + good + b"\x00" * 5
    assert next_valid_frame(memoryview(data), 0) == 13
    assert next_valid_frame(memoryview(data), 14) is None
