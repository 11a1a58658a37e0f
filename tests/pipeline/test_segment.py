"""The pipeline's segment reader against the server's recovery, byte for byte (no Spark).

For every way to cut or damage the end of a journal, the pipeline must keep the same
records and count the same torn bytes as recovery truncates, and refuse what recovery
refuses.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from purgatory_pipeline.errors import (
    JournalCorruptionError,
    NewerFormatError,
    NotAJournalError,
)
from purgatory_pipeline.records import decode_segment
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal.framing import encode_frame, encode_header
from purgatory_server._journal.journal_errors import JournalCorruptionError as ServerCorruption
from purgatory_server._journal.recovery import recover

JR = JournalRecord


def _segment(base: int, n: int) -> bytes:
    frames = [
        encode_frame(
            JR(
                signal=JR.SignalApplied(purgatory="p", key=f"k{i}", amount=i, source="s")
            ).SerializeToString()
        )
        for i in range(n)
    ]
    return encode_header(base) + b"".join(frames)


def _pipeline(directory: Path) -> tuple[int, int]:
    """(records, torn bytes) as the pipeline reads the directory."""
    segments = sorted(directory.glob("*.seg"))
    records = torn = 0
    for i, path in enumerate(segments):
        last = i == len(segments) - 1
        next_base = None if last else int(segments[i + 1].name[:20])
        for batch in decode_segment(
            str(directory), str(path), path.read_bytes(), is_last=last, next_base=next_base
        ):
            kinds = batch.column("kind").to_pylist()
            records += sum(k != "torn_tail" for k in kinds)
            torn += sum(t or 0 for t in batch.column("torn_bytes").to_pylist())
    return records, torn


def _recovery(directory: Path, scratch: Path) -> tuple[int, int]:
    copy = scratch / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    report = recover(copy, lambda index, record: None)
    return report.records, report.truncated_bytes


def _journal(tmp: Path, tail: bytes) -> Path:
    directory = tmp / "j"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / f"{0:020d}.seg").write_bytes(_segment(0, 5))
    (directory / f"{5:020d}.seg").write_bytes(_segment(5, 4) + tail)
    return directory


def test_every_truncation_of_the_head_matches_recovery(tmp_path: Path) -> None:
    whole = _segment(5, 4)
    for cut in range(len(whole) + 1):
        directory = _journal(tmp_path, b"")
        (directory / f"{5:020d}.seg").write_bytes(whole[:cut])
        assert _pipeline(directory) == _recovery(directory, tmp_path), cut


def test_garbage_and_zero_tails_match_recovery(tmp_path: Path) -> None:
    rng = random.Random(5)
    tails = [b"\0" * 4096, b"\xff" * 7, bytes(rng.randrange(256) for _ in range(300))]
    tails.append(encode_frame(b"\x0a\x03abc")[:-1])  # a frame missing its last byte
    for tail in tails:
        directory = _journal(tmp_path, tail)
        assert _pipeline(directory) == _recovery(directory, tmp_path)


def test_damage_followed_by_valid_records_is_refused_by_both(tmp_path: Path) -> None:
    good = _segment(5, 4)
    # Flip a byte inside the second frame of the head: valid frames follow it.
    damaged = bytearray(good)
    damaged[24 + 8 + 30] ^= 0xFF
    directory = _journal(tmp_path, b"")
    (directory / f"{5:020d}.seg").write_bytes(bytes(damaged))
    with pytest.raises(ServerCorruption):
        _recovery(directory, tmp_path)
    with pytest.raises(JournalCorruptionError, match=r"00000000000000000005\.seg at byte"):
        _pipeline(directory)


def test_a_torn_sealed_segment_is_corruption(tmp_path: Path) -> None:
    directory = _journal(tmp_path, b"")
    first = directory / f"{0:020d}.seg"
    first.write_bytes(first.read_bytes()[:-3])
    with pytest.raises(ServerCorruption):
        _recovery(directory, tmp_path)
    with pytest.raises(JournalCorruptionError):
        _pipeline(directory)


def test_missing_segment_is_corruption(tmp_path: Path) -> None:
    directory = _journal(tmp_path, b"")
    (directory / f"{9:020d}.seg").write_bytes(_segment(9, 1))
    (directory / f"{5:020d}.seg").unlink()
    with pytest.raises(ServerCorruption):
        _recovery(directory, tmp_path)
    with pytest.raises(JournalCorruptionError, match="expected 5"):
        _pipeline(directory)


def test_newer_format_and_foreign_files(tmp_path: Path) -> None:
    import struct
    import zlib

    head = struct.pack("<8sHHQ", b"PGJRNL\r\n", 2, 0, 0)
    newer = tmp_path / f"{0:020d}.seg"
    newer.write_bytes(head + struct.pack("<I", zlib.crc32(head)))
    with pytest.raises(NewerFormatError, match="version 2"):
        list(decode_segment("j", str(newer), newer.read_bytes(), is_last=False))
    foreign = tmp_path / "notes.txt"
    foreign.write_bytes(b"this is not a journal segment at all, just text\n" * 3)
    for last in (False, True):  # even where a torn tail would be tolerated
        with pytest.raises(NotAJournalError, match="not a journal segment"):
            list(decode_segment("j", str(foreign), foreign.read_bytes(), is_last=last))


def _rows(directory: Path, pieces: int) -> list[tuple[object, ...]]:
    """Every row of the journal, each segment read as ``pieces`` byte ranges (as split())."""
    from purgatory_pipeline.source import piece_bounds

    segments = sorted(directory.glob("*.seg"))
    rows: list[tuple[object, ...]] = []
    for i, path in enumerate(segments):
        last = i == len(segments) - 1
        next_base = None if last else int(segments[i + 1].name[:20])
        data = path.read_bytes()
        for start, stop in piece_bounds(len(data), pieces, min_bytes=1):
            for batch in decode_segment(
                str(directory),
                str(path),
                data,
                is_last=last,
                next_base=next_base,
                start=start,
                stop=stop,
            ):
                columns = ("index", "byte_offset", "kind", "key", "torn_bytes")
                rows += zip(*(batch.column(c).to_pylist() for c in columns), strict=True)
    return rows


def test_a_segment_read_in_pieces_gives_the_rows_of_one_read(tmp_path: Path) -> None:
    whole = _segment(5, 4)
    rng = random.Random(7)
    heads = [whole[:cut] for cut in range(len(whole) + 1)]
    heads += [whole + b"\0" * 50, whole + bytes(rng.randrange(256) for _ in range(90))]
    for head in heads:
        directory = _journal(tmp_path, b"")
        (directory / f"{5:020d}.seg").write_bytes(head)
        expected = _rows(directory, 1)
        assert len(expected) >= 5  # the sealed segment's records at least
        for pieces in (2, 3, 5, 64):
            assert _rows(directory, pieces) == expected, (len(head), pieces)


def test_damage_is_refused_whichever_piece_holds_it(tmp_path: Path) -> None:
    damaged = bytearray(_segment(5, 4))
    damaged[24 + 8 + 30] ^= 0xFF  # inside the second frame; valid frames follow
    directory = _journal(tmp_path, b"")
    (directory / f"{5:020d}.seg").write_bytes(bytes(damaged))
    for pieces in (1, 2, 3, 64):
        with pytest.raises(
            JournalCorruptionError, match=r"0005\.seg at byte offset 44: record CRC mismatch"
        ):
            _rows(directory, pieces)


def test_piece_bounds_cover_the_file_once() -> None:
    from purgatory_pipeline.source import piece_bounds

    assert piece_bounds(100, 1) == [(0, None)]
    assert piece_bounds(5 << 20, 4) == [(0, None)]  # under 8 MiB: one piece
    assert piece_bounds(100, 4, min_bytes=10) == [(0, 25), (25, 50), (50, 75), (75, None)]
    assert piece_bounds(30, 4, min_bytes=10) == [(0, 10), (10, 20), (20, None)]
