"""Recovery: torn tails are truncated, real corruption stops start-up or is repaired."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from purgatory_server._journal import (
    FsyncPolicy,
    Journal,
    JournalCorruptionError,
    JournalState,
    SegmentScan,
    recover,
)
from purgatory_server._journal.framing import FRAME_OVERHEAD, HEADER_BYTES, encode_frame
from purgatory_server._journal.segments import segment_name

from tests.journal.helpers import open_journal, reg, segment_paths, sig


def write_ops(path: Path, count: int, **config: object) -> None:
    config.setdefault("fsync", FsyncPolicy.NEVER)
    with open_journal(path, **config) as journal:
        for i in range(count):
            journal.append_sync([reg(f"op{i}", "k")])


def pending_after_recover(path: Path, repair: bool = False) -> set[str]:
    state = JournalState(100)
    recover(path, state.apply, repair=repair)
    return set(state.pending)


def record_offsets(path: Path) -> list[int]:
    return [offset for offset, _ in SegmentScan.read(path)]


def test_torn_tail_truncated_at_every_byte_of_the_last_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    original = tmp_path / "orig"
    write_ops(original, 3)
    [seg] = segment_paths(original)
    data = seg.read_bytes()
    last_start = record_offsets(seg)[-1]
    assert len(data) - last_start == FRAME_OVERHEAD + len(reg("op2", "k").SerializeToString())
    for cut in range(last_start, len(data)):
        work = tmp_path / f"cut{cut}"
        work.mkdir()
        (work / seg.name).write_bytes(data[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert pending_after_recover(work) == {"op0", "op1"}
        assert (work / seg.name).stat().st_size == last_start
        assert ("torn tail" in caplog.text) == (cut > last_start)
    assert pending_after_recover(original) == {"op0", "op1", "op2"}


def test_zeros_and_a_half_frame_after_the_last_record_are_a_torn_tail(tmp_path: Path) -> None:
    write_ops(tmp_path, 2)
    [seg] = segment_paths(tmp_path)
    size = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(encode_frame(b"\x0a\x02\x12\x00")[:7] + bytes(4096))
    assert pending_after_recover(tmp_path) == {"op0", "op1"}
    assert seg.stat().st_size == size


def test_journal_appends_after_a_truncated_tail(tmp_path: Path) -> None:
    write_ops(tmp_path, 2)
    [seg] = segment_paths(tmp_path)
    with seg.open("ab") as f:
        f.write(b"\x01\x02\x03")
    with open_journal(tmp_path) as journal:
        assert journal.report.truncated_bytes == 3
        assert journal.append_sync([sig("k", 5)]) == 2
    with open_journal(tmp_path) as journal:
        assert [s.amount for s in journal.recovered.pending["op0"].signals] == [5]


def test_bad_record_in_the_middle_names_file_and_offset(tmp_path: Path) -> None:
    write_ops(tmp_path, 5)
    [seg] = segment_paths(tmp_path)
    offsets = record_offsets(seg)
    data = bytearray(seg.read_bytes())
    data[offsets[2] + FRAME_OVERHEAD + 3] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(JournalCorruptionError) as info:
        open_journal(tmp_path)
    assert info.value.path == seg
    assert info.value.offset == offsets[2]
    assert str(seg) in str(info.value)
    assert f"offset {offsets[2]}" in str(info.value)
    assert seg.read_bytes() == bytes(data)  # nothing was changed


def test_repair_truncates_at_the_bad_record_and_sets_the_rest_aside(tmp_path: Path) -> None:
    write_ops(tmp_path, 5)
    [seg] = segment_paths(tmp_path)
    offsets = record_offsets(seg)
    data = bytearray(seg.read_bytes())
    data[offsets[2] + 1] ^= 0xFF
    seg.write_bytes(bytes(data))
    with Journal.open(tmp_path, repair=True) as journal:
        assert set(journal.recovered.pending) == {"op0", "op1"}
        assert journal.report.repaired
        assert journal.append_sync([reg("new")]) == 2
    assert seg.stat().st_size == offsets[2] + len(encode_frame(reg("new").SerializeToString()))
    aside = tmp_path / f"{seg.name}.corrupt-{offsets[2]}"
    assert aside.read_bytes() == bytes(data[offsets[2] :])
    assert pending_after_recover(tmp_path) == {"op0", "op1", "new"}


def _three_segments(path: Path) -> list[Path]:
    # ~38-byte records, 4096-byte segments: 400 records span several segments.
    write_ops(path, 400, segment_bytes=4096)
    segs = segment_paths(path)
    assert len(segs) >= 3
    return segs


def test_corruption_in_a_sealed_segment_is_never_a_torn_tail(tmp_path: Path) -> None:
    segs = _three_segments(tmp_path)
    first = segs[0]
    last_offset = record_offsets(first)[-1]
    data = bytearray(first.read_bytes())
    data[-1] ^= 0x01  # damage the final record of a non-last segment
    first.write_bytes(bytes(data))
    with pytest.raises(JournalCorruptionError) as info:
        pending_after_recover(tmp_path)
    assert (info.value.path, info.value.offset) == (first, last_offset)
    kept = pending_after_recover(tmp_path, repair=True)
    assert len(kept) == len(record_offsets(first))  # segment 0 minus its last record
    assert segment_paths(tmp_path) == [first]
    for later in segs[1:]:
        assert later.with_name(later.name + ".dropped").exists()


def test_missing_middle_segment_is_reported(tmp_path: Path) -> None:
    segs = _three_segments(tmp_path)
    segs[1].unlink()
    with pytest.raises(JournalCorruptionError, match="expected") as info:
        pending_after_recover(tmp_path)
    assert (info.value.path, info.value.offset) == (segs[2], 0)


def test_bad_header_of_a_sealed_segment_is_reported(tmp_path: Path) -> None:
    segs = _three_segments(tmp_path)
    data = bytearray(segs[1].read_bytes())
    data[0] ^= 0xFF
    segs[1].write_bytes(bytes(data))
    with pytest.raises(JournalCorruptionError, match=r"magic|CRC") as info:
        pending_after_recover(tmp_path)
    assert (info.value.path, info.value.offset) == (segs[1], 0)


def test_torn_header_of_a_fresh_last_segment_is_removed(tmp_path: Path) -> None:
    write_ops(tmp_path, 3)
    torn = tmp_path / segment_name(3)
    torn.write_bytes(b"PGJR")
    assert pending_after_recover(tmp_path) == {"op0", "op1", "op2"}
    assert not torn.exists()
    with open_journal(tmp_path) as journal:
        assert journal.append_sync([reg("op3")]) == 3
    assert [p.name for p in segment_paths(tmp_path)] == [segment_name(0)]


def test_crc_valid_but_unparsable_record_is_corruption_even_at_the_end(tmp_path: Path) -> None:
    write_ops(tmp_path, 2)
    [seg] = segment_paths(tmp_path)
    end = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(encode_frame(b"\xff\xff\xff"))
    with pytest.raises(JournalCorruptionError, match="does not parse") as info:
        pending_after_recover(tmp_path)
    assert info.value.offset == end


def test_empty_directory_and_copy_of_a_closed_journal(tmp_path: Path) -> None:
    assert pending_after_recover(tmp_path) == set()
    write_ops(tmp_path / "a", 4)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert pending_after_recover(tmp_path / "b") == {f"op{i}" for i in range(4)}
    [seg] = segment_paths(tmp_path / "b")
    assert record_offsets(seg)[0] == HEADER_BYTES
