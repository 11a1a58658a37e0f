"""Retention and compaction, including crashes between compaction's steps."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import (
    FsyncPolicy,
    Journal,
    JournalConfig,
    JournalFailedError,
    JournalState,
    RecoveredState,
    SegmentScan,
)
from purgatory_server._journal.compaction import deletable_prefix, plan_compaction
from purgatory_server._journal.framing import encode_frame, encode_header
from purgatory_server._journal.segments import SegmentMeta, segment_name
from purgatory_server._journal.wire import sole_field, split_carried, varint

from tests.journal.helpers import out, reg, segment_paths, sig

SMALL = {"fsync": FsyncPolicy.NEVER, "segment_bytes": 4096, "auto_compact": False}


def summary(state: RecoveredState) -> dict[str, Any]:
    return {
        "pending": {
            op_id: (p.registration.due_wall_ms, [s.amount for s in p.signals])
            for op_id, p in state.pending.items()
        },
        "key_values": dict(state.key_values),
        "last_sequence": state.last_sequence,
        "events": [e.sequence for e in state.events],
    }


def reopen_summary(path: Path, retain_events: int = 5, **config: Any) -> dict[str, Any]:
    with Journal.open(path, JournalConfig(retain_events=retain_events, **config)) as journal:
        return summary(journal.recovered)


def churn(journal: Journal, start: int, count: int, first_seq: int) -> int:
    """Register and complete ``count`` short operations; returns the next sequence."""
    seq = first_seq
    for i in range(start, start + count):
        journal.append_sync([reg(f"s{i}", "hot"), sig("hot", 1)])
        journal.append_sync([out(f"s{i}", seq)])
        seq += 1
    return seq


def kinds(path: Path) -> list[str | None]:
    found = []
    for seg in segment_paths(path):
        for _, payload in SegmentScan.read(seg):
            found.append(JournalRecord.FromString(bytes(payload)).WhichOneof("record"))
    return found


def registered_ids(path: Path) -> set[str]:
    found = set()
    for seg in segment_paths(path):
        for _, payload in SegmentScan.read(seg):
            record = JournalRecord.FromString(bytes(payload))
            if record.HasField("registered"):
                found.add(record.registered.operation_id)
    return found


def test_deletable_prefix_stops_at_the_window_and_never_takes_the_head() -> None:
    state = JournalState(retain_events=2)
    segs = [SegmentMeta(0, Path("a"), 100, 10), SegmentMeta(10, Path("b"), 100, 10)]
    segs.append(SegmentMeta(20, Path("c"), 100, 10))
    assert deletable_prefix(segs[:1], state) == []
    assert deletable_prefix(segs, state) == segs[:2]
    for i, seq in ((3, 1), (12, 2), (25, 3)):  # outcome records at these indices
        state.apply(i, out(f"o{seq}", seq))
    # Window holds sequences 2 and 3; sequence 2 sits at index 12, in segment "b".
    assert deletable_prefix(segs, state) == segs[:1]


def test_plan_carries_live_operations_and_old_key_values() -> None:
    state = JournalState(retain_events=0)
    for index, record in enumerate(
        [reg("long", "k"), sig("k", 3, value=9), reg("short"), out("short", 1), sig("k", 4)]
    ):
        state.apply(index, record)
    segs = [SegmentMeta(0, Path("a"), 500, 4), SegmentMeta(4, Path("b"), 100, 1)]
    plan = plan_compaction(segs, state)
    assert plan is not None
    assert plan.cutoff == 4
    assert (plan.carried_operations, plan.carried_keys) == (1, 1)
    raw_carried = plan.records[0]
    carried, key, checkpoint = (JournalRecord.FromString(r) for r in plan.records)
    assert carried.carried_operation.registration.operation_id == "long"
    # The carry is what protobuf itself would write for it, and holds the journaled
    # registration and signals byte for byte.
    assert raw_carried == carried.SerializeToString()
    assert carried.carried_operation.source_index == 0
    journaled = reg("long", "k").registered.SerializeToString()
    assert raw_carried.find(journaled) > 0
    assert [s.amount for s in carried.carried_operation.progress] == [3, 4]
    assert (key.carried_key_value.key, key.carried_key_value.value) == ("k", 9)
    assert checkpoint.compaction.dropped_before_index == 4
    assert checkpoint.compaction.last_sequence == 1


def test_retention_deletes_ended_segments_once_out_of_the_window(tmp_path: Path) -> None:
    config = JournalConfig(retain_events=50, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        seq = churn(journal, 0, 200, 1)
        before = len(journal.segments())
        expected = summary(journal._state.snapshot(0))
        result = journal.compact()
        assert result.deleted_segments > 0
        assert result.carried_operations == 0
        assert len(journal.segments()) == before - result.deleted_segments
        # What is left still holds the whole window.
        churn(journal, 200, 0, seq)
    got = reopen_summary(tmp_path, retain_events=50)
    assert got == expected
    assert got["events"] == list(range(151, 201))


def test_window_pins_segments(tmp_path: Path) -> None:
    config = JournalConfig(retain_events=10_000, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        churn(journal, 0, 200, 1)
        result = journal.compact(force=True)
        assert result.deleted_segments == 0
        assert result.skipped_reason == "no deletable segment"


def test_long_lived_operation_is_carried_forward(tmp_path: Path) -> None:
    config = JournalConfig(retain_events=5, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        journal.append_sync([reg("month", "hot", due=2_592_000_000), sig("hot", 7, value=1)])
        churn(journal, 0, 300, 1)
        expected = summary(journal._state.snapshot(0))
        result = journal.compact()
        assert result.carried_operations == 1
        assert result.carried_keys == 1
        assert result.deleted_segments >= 3
        assert segment_paths(tmp_path)[0].name != f"{0:020d}.seg"
    got = reopen_summary(tmp_path)
    assert got == expected
    assert got["pending"]["month"] == (2_592_000_000, [7] + [1] * 300)
    assert got["key_values"] == {"hot": 1}
    assert "carried_operation" in kinds(tmp_path)


def test_space_stays_bounded_with_auto_compaction(tmp_path: Path) -> None:
    config = JournalConfig(
        fsync=FsyncPolicy.NEVER, segment_bytes=4096, retain_events=20, auto_compact=True
    )
    with Journal.open(tmp_path, config) as journal:
        journal.append_sync([reg("forever", "cold")])
        churn(journal, 0, 3000, 1)
        assert journal.compactions > 10
        total = sum(seg.stat().st_size for seg in segment_paths(tmp_path))
        assert total < 5 * 4096
    assert set(reopen_summary(tmp_path, retain_events=20)["pending"]) == {"forever"}


def test_space_stays_bounded_when_every_signal_sets_a_new_key(tmp_path: Path) -> None:
    """Distinct value-carrying keys are bounded like the server's memory of them: the
    journal does not carry every key that ever had a value forever."""
    config = JournalConfig(
        fsync=FsyncPolicy.NEVER,
        segment_bytes=4096,
        retain_events=20,
        auto_compact=True,
        max_key_values=10,
    )
    with Journal.open(tmp_path, config) as journal:
        for i in range(3000):
            journal.append_sync([sig(f"key-{i}", value=i)])
        assert journal.compactions > 10
        total = sum(seg.stat().st_size for seg in segment_paths(tmp_path))
        assert total < 5 * 4096
    values = reopen_summary(tmp_path, retain_events=20, max_key_values=10)["key_values"]
    assert values == {f"key-{i}": i for i in range(2990, 3000)}


def test_carry_ratio_threshold_skips_unless_forced(tmp_path: Path) -> None:
    config = JournalConfig(retain_events=0, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        for i in range(300):
            journal.append_sync([reg(f"live{i}", "k")])  # all pending: nothing to free
        skipped = journal.compact()
        assert skipped.deleted_segments == 0
        assert "allowed" in skipped.skipped_reason
        forced = journal.compact(force=True)
        assert forced.carried_operations > 0
        assert forced.deleted_segments > 0
    assert len(reopen_summary(tmp_path, retain_events=0)["pending"]) == 300


class Crash(OSError):
    pass


def crash_at(point: str) -> Any:
    def fault(name: str) -> None:
        if name == point:
            raise Crash(f"simulated crash at {name}")

    return fault


def build_compactable(path: Path, fault: Any) -> tuple[Journal, dict[str, Any]]:
    config = JournalConfig(retain_events=5, **SMALL)  # type: ignore[arg-type]
    journal = Journal.open(path, config, _fault=fault)
    journal.append_sync([reg("long", "hot", due=99), sig("hot", 5, value=3)])
    churn(journal, 0, 300, 1)
    journal.append_sync([sig("hot", 11)])
    return journal, summary(journal._state.snapshot(0))


@pytest.mark.parametrize("which", ["carried", "deleted-first", "deleted-second"])
def test_crash_between_compaction_steps_loses_nothing(tmp_path: Path, which: str) -> None:
    journal, expected = build_compactable(tmp_path, None)
    names = [p.name for p in segment_paths(tmp_path)]
    journal.close()
    point = {
        "carried": "compaction:carried",
        "deleted-first": f"compaction:deleted:{names[0]}",
        "deleted-second": f"compaction:deleted:{names[1]}",
    }[which]
    config = JournalConfig(retain_events=5, **SMALL)  # type: ignore[arg-type]
    journal = Journal.open(tmp_path, config, _fault=crash_at(point))
    try:
        with pytest.raises(JournalFailedError):
            journal.compact(force=True)
    finally:
        journal.close()
    assert reopen_summary(tmp_path) == expected
    # Until then the log held the registration *and* its carried copy (or only the copy).
    # The durable copy now anchors the operation: the next compaction just finishes the
    # deletions without copying again.
    with Journal.open(tmp_path, config) as journal:
        result = journal.compact(force=True)
        assert result.carried_operations == 0
        assert result.deleted_segments > 0
    assert reopen_summary(tmp_path) == expected
    assert kinds(tmp_path).count("carried_operation") == 1
    assert "long" not in registered_ids(tmp_path)  # the original registration is gone


def test_crash_while_writing_the_carried_records(tmp_path: Path) -> None:
    journal, expected = build_compactable(tmp_path, crash_at("compaction:carried"))
    old_head = segment_paths(tmp_path)[-1]
    old_size = old_head.stat().st_size
    with pytest.raises(JournalFailedError):
        journal.compact(force=True)
    journal.close()
    # The carried copy (bigger than a segment here) went to segment(s) after the old head.
    new_head = segment_paths(tmp_path)[-1]
    assert new_head != old_head
    assert old_head.stat().st_size == old_size
    grown = new_head.read_bytes()
    for cut in range(0, len(grown), 97):  # the copy was only partly written
        new_head.write_bytes(grown[:cut])
        assert reopen_summary(tmp_path) == expected


@pytest.mark.parametrize("seed", range(5))
def test_compaction_never_changes_what_recovery_sees(tmp_path: Path, seed: int) -> None:
    """Random workload, tiny segments, auto-compaction on: the reopened state must equal
    the state of the full, never-compacted record stream."""
    rng = random.Random(seed)
    config = JournalConfig(
        fsync=FsyncPolicy.NEVER,
        segment_bytes=4096,
        retain_events=rng.choice([0, 3, 40]),
        compaction_max_carry_ratio=rng.choice([0.3, 1.0]),
    )
    reference = JournalState(config.retain_events)
    pending: list[str] = []
    seq = 0
    with Journal.open(tmp_path, config) as journal:
        for step in range(1500):
            roll = rng.random()
            if roll < 0.3 or not pending:
                op = f"op{step}"
                keys = rng.sample(["a", "b", "c", "d", "e"], rng.randint(0, 2))
                batch = [reg(op, *keys, due=step)]
                pending.append(op)
            elif roll < 0.75:
                value = step if rng.random() < 0.5 else None
                batch = [sig(rng.choice("abcdef"), amount=step, value=value)]
            else:
                seq += 1
                batch = [out(pending.pop(rng.randrange(len(pending))), seq)]
            first = journal.append_sync(batch)
            for offset, record in enumerate(batch):
                reference.apply(first + offset, record)
            if step % 250 == 249:
                journal.compact(force=True)  # besides the automatic ones after rolls
        expected = summary(reference.snapshot(0))
        compactions = journal.compactions
    got = reopen_summary(tmp_path, retain_events=config.retain_events)
    assert got == expected
    assert compactions > 0


def _carried_parts(path: Path, op_id: str) -> list[tuple[bytes, list[bytes]]]:
    """The exact registration and progress bytes of every carried copy of ``op_id``."""
    found = []
    for seg in segment_paths(path):
        for _, payload in SegmentScan.read(seg):
            sole = sole_field(payload)
            if sole is None or sole[0] != 4:  # carried_operation
                continue
            parts = split_carried(payload[sole[1] :])
            assert parts is not None
            if JournalRecord.OperationRegistered.FromString(parts[0]).operation_id == op_id:
                found.append(parts)
    return found


def test_a_compaction_after_recovery_carries_the_journaled_bytes_verbatim(
    tmp_path: Path,
) -> None:
    """The journal keeps registrations and progress as the bytes it read, and compaction
    writes those back: even an encoding protobuf would not produce itself (fields out of
    number order) survives recovery and two compactions byte for byte."""
    registered = JournalRecord.OperationRegistered
    raw = (
        registered(due_wall_ms=2_592_000_000, created_wall_ms=1).SerializeToString()
        + registered(
            purgatory="p", operation_id="kept", keys=["hot"], timeout_ms=30_000
        ).SerializeToString()
    )
    assert raw != registered.FromString(raw).SerializeToString()
    signal = JournalRecord.SignalApplied
    sig_raw = (
        signal(applied_wall_ms=5).SerializeToString()
        + signal(purgatory="p", key="hot", amount=7).SerializeToString()
    )
    assert sig_raw != signal.FromString(sig_raw).SerializeToString()
    with (tmp_path / segment_name(0)).open("wb") as f:
        f.write(encode_header(0))
        f.write(encode_frame(b"\x0a" + varint(len(raw)) + raw))
        f.write(encode_frame(b"\x12" + varint(len(sig_raw)) + sig_raw))
    config = JournalConfig(retain_events=5, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        recovered = journal.recovered.pending["kept"]
        assert (recovered.raw, recovered.raw_signals) == (raw, (sig_raw,))
        churn(journal, 0, 200, 1)
        assert journal.compact(force=True).carried_operations == 1
    ((carried, progress),) = _carried_parts(tmp_path, "kept")
    assert carried == raw
    assert progress[0] == sig_raw and len(progress) == 201
    expected = reopen_summary(tmp_path)
    assert expected["pending"]["kept"] == (2_592_000_000, [7] + [1] * 200)
    with Journal.open(tmp_path, config) as journal:  # recovered from the carried copy
        churn(journal, 200, 200, 201)
        assert journal.compact(force=True).carried_operations == 1
    ((carried, progress),) = _carried_parts(tmp_path, "kept")
    assert carried == raw and progress[0] == sig_raw and len(progress) == 401
    assert reopen_summary(tmp_path)["pending"]["kept"] == (2_592_000_000, [7] + [1] * 400)


def _outcome_at(op_id: str, sequence: int, wall_ms: int) -> JournalRecord:
    record = out(op_id, sequence)
    record.outcome.completed_wall_ms = wall_ms
    return record


def test_the_dedup_window_pins_its_segments_and_is_recovered(tmp_path: Path) -> None:
    # A small event window (5) but a dedup window of 1 s: outcomes that ended within a
    # second of the newest survive compaction and reopening; older ones may go.
    dedup = {"dedup_window_ms": 1000, "dedup_max_bytes": 1 << 20}
    config = JournalConfig(retain_events=5, **SMALL, **dedup)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        for i in range(100):  # old: ended at t=0
            journal.append_sync([reg(f"old{i}", "k"), _outcome_at(f"old{i}", i + 1, 0)])
        for i in range(100):  # recent: ended at t=5000..5099
            seq = 101 + i
            journal.append_sync([reg(f"new{i}", "k"), _outcome_at(f"new{i}", seq, 5000 + i)])
        result = journal.compact(force=True)
        assert result.deleted_segments > 0  # the old ones' segments could go
    with Journal.open(tmp_path, JournalConfig(retain_events=5, **dedup)) as journal:
        finished = [o.operation_id for o in journal.recovered.finished]
        assert [o.sequence for o in journal.recovered.events] == list(range(196, 201))
    assert finished == [f"new{i}" for i in range(100)]  # each once, in journal order


def test_without_a_dedup_window_only_the_event_window_is_recovered(tmp_path: Path) -> None:
    config = JournalConfig(retain_events=5, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        for i in range(30):
            journal.append_sync([reg(f"o{i}", "k"), _outcome_at(f"o{i}", i + 1, 5000)])
        journal.compact(force=True)
    with Journal.open(tmp_path, JournalConfig(retain_events=5)) as journal:
        assert [o.operation_id for o in journal.recovered.finished] == [
            f"o{i}" for i in range(25, 30)
        ]
