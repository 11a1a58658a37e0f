"""Just enough of protobuf's wire format to handle records without parsing them whole.

The journal keeps pending registrations and their signals as journaled bytes (see
:mod:`.state`), which needs three things from the wire format: the one field a
``JournalRecord`` payload holds (its oneof case) without parsing it, a
``CarriedOperation`` split into its fields' bytes, and one built from bytes.

Everything here is pure, and every reader answers None (never guesses) for bytes that are
not in the simple shape it expects; the caller then falls back to a full protobuf parse.
Thread-safety: none needed (no state).
"""

from __future__ import annotations

__all__ = ["carried_operation_payload", "sole_field", "split_carried", "varint"]

_LEN = 2  # wire type of length-delimited fields (strings, bytes, messages)


def varint(value: int) -> bytes:
    """The base-128 varint encoding of a non-negative ``value``."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    """(value, position after it), or None if it runs past the end or past 10 bytes."""
    value = shift = 0
    end = len(data)
    while pos < end and shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return None


def sole_field(payload: bytes | memoryview) -> tuple[int, int] | None:
    """(field number, start of its bytes) if ``payload`` is exactly one length-delimited
    field with a one-byte tag (every ``JournalRecord`` case this journal writes), else None.

    The field's bytes run from the start to the end of ``payload``.
    """
    if len(payload) < 2:
        return None
    tag = payload[0]
    if tag >= 0x80 or tag & 7 != _LEN:
        return None
    length = payload[1]
    start = 2
    if length >= 0x80:
        if len(payload) > 2 and payload[2] < 0x80:  # two length bytes: most registrations
            length = (length & 0x7F) | (payload[2] << 7)
            start = 3
        else:
            read = _read_varint(payload, 1)
            if read is None:
                return None
            length, start = read
    if start + length != len(payload):
        return None
    return tag >> 3, start


def split_carried(body: bytes | memoryview) -> tuple[bytes, list[bytes]] | None:
    """A ``CarriedOperation``'s (registration bytes, progress signals' bytes), exactly as
    they are inside ``body``; None if ``body`` holds anything but fields 1-3 as written by
    :func:`carried_operation_payload` (or by protobuf: any order, registration once)."""
    registration: bytes | None = None
    progress: list[bytes] = []
    pos, end = 0, len(body)
    while pos < end:
        tag = body[pos]
        pos += 1
        if tag == 0x18:  # source_index (3, varint): informational
            read = _read_varint(body, pos)
            if read is None:
                return None
            pos = read[1]
            continue
        if tag not in (0x0A, 0x12):  # registration (1), progress (2)
            return None
        read = _read_varint(body, pos)
        if read is None or read[1] + read[0] > end:
            return None
        length, pos = read
        value = bytes(body[pos : pos + length])
        pos += length
        if tag == 0x12:
            progress.append(value)
        elif registration is None:
            registration = value
        else:
            return None  # a repeated message field merges: leave that to protobuf
    if registration is None:
        return None
    return registration, progress


def carried_operation_payload(registration: bytes, progress: list[bytes], source: int) -> bytes:
    """The serialized ``JournalRecord`` whose ``carried_operation`` holds ``registration``
    and ``progress`` byte for byte (the encoding protobuf itself produces: fields in
    number order, ``source_index`` omitted when 0)."""
    parts = [b"\x0a", varint(len(registration)), registration]
    for signal in progress:
        parts += (b"\x12", varint(len(signal)), signal)
    if source:
        parts += (b"\x18", varint(source))
    body = b"".join(parts)
    return b"\x22" + varint(len(body)) + body
