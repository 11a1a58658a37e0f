"""The pure state builder: replay rules of docs/journal.md, record by record."""

from __future__ import annotations

import logging
import random

import pytest
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import JournalState
from purgatory_server._journal.wire import sole_field

from tests.journal.helpers import State, out, reg, sig


def build(
    *records: JournalRecord, retain: int = 100, max_key_values: int = 100_000
) -> JournalState:
    state = JournalState(retain, max_key_values)
    for index, record in enumerate(records):
        state.apply(index, record)
    return state


def amounts(state: JournalState, op_id: str) -> list[int]:
    return [s.amount for s in state.pending[op_id].signals]


def test_signals_become_progress_of_watchers_registered_before_them() -> None:
    state = build(
        sig("a", 100),  # before any registration: not progress
        reg("x", "a", "b"),
        sig("a", 1),
        reg("y", "b"),
        sig("b", 2),
        sig("c", 3),  # nobody watches c
    )
    assert amounts(state, "x") == [1, 2]
    assert amounts(state, "y") == [2]


def test_an_operation_listing_a_key_twice_gets_each_signal_once() -> None:
    state = build(reg("x", "a", "a"), sig("a", 5))
    assert amounts(state, "x") == [5]


def test_key_values_follow_the_latest_value_signal_only() -> None:
    state = build(sig("a", value=3), sig("a", amount=9), sig("b", value=1), sig("a", value=4))
    snap = state.snapshot(4)
    assert dict(snap.key_values) == {"a": 4, "b": 1}


def test_key_values_are_bounded_least_recently_set_first() -> None:
    state = build(*(sig(f"k{i}", value=i) for i in range(6)), sig("k1", value=10), max_key_values=3)
    # k0..k3 were set least recently (k1's update made it the most recent): k0, k2, k3 go.
    assert dict(state.snapshot(7).key_values) == {"k4": 4, "k5": 5, "k1": 10}


def test_key_value_eviction_spares_keys_a_pending_operation_watches() -> None:
    records = [sig("w", value=1), reg("x", "w"), *(sig(f"k{i}", value=i) for i in range(4))]
    state = build(*records, max_key_values=2)
    values = dict(state.snapshot(len(records)).key_values)
    assert values["w"] == 1  # watched by pending x: kept although least recently set
    assert len(values) == 2 and "k3" in values
    # Once x has ended, w is evictable like any other key. (Sparing it moved it to the
    # recent end, as the server's LatestValues does, so it is the second to go.)
    n = len(records)
    state.apply(n, out("x", 1))
    state.apply(n + 1, sig("k8", value=8))
    state.apply(n + 2, sig("k9", value=9))
    assert dict(state.snapshot(n + 3).key_values) == {"k8": 8, "k9": 9}


def test_outcome_ends_operation_and_stops_its_progress() -> None:
    state = build(reg("x", "a"), out("x", 1, State.STATE_FORCE_COMPLETED), sig("a"))
    snap = state.snapshot(3)
    assert snap.pending == {}
    assert snap.ended == frozenset({"x"})
    assert snap.last_sequence == 1
    assert [e.state for e in snap.events] == [State.STATE_FORCE_COMPLETED]


def test_second_outcome_and_duplicate_registration_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        state = build(
            reg("x", "a", due=10),
            reg("x", "a", due=99),
            sig("a", 1),
            out("x", 1),
            out("x", 2),
        )
    snap = state.snapshot(5)
    assert [e.sequence for e in snap.events] == [1]
    assert snap.last_sequence == 1
    assert "registers 'x' again" in caplog.text
    assert "second outcome" in caplog.text
    again = build(reg("x", "a", due=10), reg("x", "a", due=99))
    assert again.pending["x"].registration.due_wall_ms == 10


def test_event_window_keeps_the_last_n_sequences() -> None:
    records = []
    for i in range(1, 11):
        records += [reg(f"o{i}"), out(f"o{i}", i)]
    snap = build(*records, retain=3).snapshot(len(records))
    assert [e.sequence for e in snap.events] == [8, 9, 10]
    assert snap.last_sequence == 10
    assert build(*records, retain=0).snapshot(20).events == ()


def test_carried_operation_replaces_definition_and_progress_idempotently() -> None:
    carried = JournalRecord(
        carried_operation=JournalRecord.CarriedOperation(
            registration=reg("x", "a", due=42).registered,
            progress=[sig("a", 1).signal, sig("a", 2).signal],
            source_index=0,
        )
    )
    plain = build(reg("x", "a", due=42), sig("a", 1), sig("a", 2), sig("a", 3))
    with_copy = build(reg("x", "a", due=42), sig("a", 1), sig("a", 2), carried, sig("a", 3))
    twice = build(reg("x", "a", due=42), sig("a", 1), sig("a", 2), carried, carried, sig("a", 3))
    only_copy = build(sig("a", 1), carried, sig("a", 3))  # registration compacted away
    for state in (with_copy, twice, only_copy):
        assert amounts(state, "x") == amounts(plain, "x") == [1, 2, 3]
        assert state.pending["x"].registration.due_wall_ms == 42
    assert with_copy.pending["x"].anchor == 3
    assert twice.pending["x"].anchor == 4


def test_carried_copy_of_an_ended_operation_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    carried = JournalRecord(
        carried_operation=JournalRecord.CarriedOperation(registration=reg("x").registered)
    )
    with caplog.at_level(logging.WARNING):
        state = build(reg("x"), out("x", 1), carried)
    assert state.pending == {}
    assert "carries ended operation" in caplog.text


def test_carried_key_value_sets_value_and_later_signals_win() -> None:
    carried = JournalRecord(
        carried_key_value=JournalRecord.CarriedKeyValue(purgatory="p", key="k", value=7)
    )
    assert dict(build(carried).snapshot(1).key_values) == {"k": 7}
    assert dict(build(carried, sig("k", value=8)).snapshot(2).key_values) == {"k": 8}


def test_reregistering_an_ended_id_starts_a_new_operation() -> None:
    state = build(reg("x", "a"), out("x", 1), reg("x", "b"), sig("a"), sig("b", 4))
    assert amounts(state, "x") == [4]
    assert "x" not in state.snapshot(5).ended


def test_forget_ended_before_drops_only_older_outcomes() -> None:
    state = build(reg("x"), out("x", 1), reg("y"), out("y", 2))
    state.forget_ended_before(2)
    assert state.snapshot(4).ended == frozenset({"y"})


def test_snapshot_is_independent_of_later_applies() -> None:
    state = build(reg("x", "a"), sig("a", 1))
    snap = state.snapshot(2)
    state.apply(2, sig("a", 2))
    state.apply(3, out("x", 1))
    assert [s.amount for s in snap.pending["x"].signals] == [1]
    assert snap.next_index == 2


def test_compaction_checkpoint_keeps_the_sequence_when_outcomes_are_gone() -> None:
    checkpoint = JournalRecord(
        compaction=JournalRecord.CompactionCheckpoint(dropped_before_index=9, last_sequence=41)
    )
    assert build(checkpoint).snapshot(1).last_sequence == 41
    assert build(reg("x"), out("x", 50), checkpoint).snapshot(3).last_sequence == 50


def _replay_summary(state: JournalState) -> dict[str, object]:
    snap = state.snapshot(0)
    return {
        "pending": {
            op_id: (p.raw, p.raw_signals, p.due_wall_ms) for op_id, p in snap.pending.items()
        },
        "key_values": dict(snap.key_values),
        "last_sequence": snap.last_sequence,
        "ended": snap.ended,
        "applied": state.records_applied,
    }


def test_replaying_serialized_records_builds_the_same_state_as_parsed_ones() -> None:
    """apply_raw (start-up replay: registrations and signals read without a full parse)
    and apply (parsed records) agree on every kind, carries and reschedules included."""
    rng = random.Random(15)
    records: list[JournalRecord] = []
    pending: list[str] = []
    seq = 0
    for step in range(600):
        roll = rng.random()
        if roll < 0.3 or not pending:
            keys = rng.sample(["a", "b", "c", "a"], rng.randint(0, 3))  # "a" may repeat
            records.append(reg(f"op{step}", *keys, due=step, payload=bytes(step % 7)))
            pending.append(f"op{step}")
        elif roll < 0.6:
            value = step if rng.random() < 0.5 else None
            records.append(sig(rng.choice("abcd"), amount=step, value=value))
        elif roll < 0.7:
            moved = JournalRecord.OperationRescheduled(
                purgatory="p", operation_id=rng.choice(pending), due_wall_ms=10_000 + step
            )
            records.append(JournalRecord(rescheduled=moved))
        elif roll < 0.8:
            carried = JournalRecord.CarriedOperation(
                registration=reg(rng.choice(pending), "b", due=20_000 + step).registered,
                progress=[sig("b", amount=step).signal],
                source_index=step,
            )
            records.append(JournalRecord(carried_operation=carried))
        else:
            seq += 1
            records.append(out(pending.pop(rng.randrange(len(pending))), seq))
    parsed = JournalState(10, max_key_values=2)
    raw = JournalState(10, max_key_values=2)
    raw.track_due_times()
    for index, record in enumerate(records):
        parsed.apply(index, record)
        raw.apply_raw(index, memoryview(record.SerializeToString()))
    assert _replay_summary(raw) == _replay_summary(parsed)
    assert pending and set(_replay_summary(raw)["pending"]) == set(pending)  # type: ignore[arg-type]


def test_a_hot_key_keeps_no_more_dead_watchers_than_live_ones() -> None:
    state = JournalState(0)
    for i in range(1000):
        state.apply(2 * i, reg(f"op{i}", "hot"))
        if i >= 10:
            state.apply(2 * i + 1, out(f"op{i - 10}", i))
    watching = state._watchers["hot"]
    assert watching.live == 10
    assert len(watching.ops) <= 2 * 10 + 8
    state.apply(5000, sig("hot", 3))
    assert sorted(op for op, live in state.pending.items() if live.raw_signals) == [
        f"op{i}" for i in range(990, 1000)
    ]
    for i in range(990, 1000):
        state.apply(6000 + i, out(f"op{i}", 2000 + i))
    assert "hot" not in state._watchers


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"\x0a\x01x", (1, 2)),
        (b"\x22\x80\x01" + b"x" * 128, (4, 3)),
        (b"\x0a\x80", None),  # the length runs past the end
        (b"\x0a\x02x", None),  # shorter than it says
        (b"\x0a\x01xx", None),  # a second field follows
        (b"\x08\x01", None),  # not length-delimited
        (b"", None),
    ],
)
def test_sole_field_finds_only_a_lone_length_delimited_field(
    payload: bytes, expected: tuple[int, int] | None
) -> None:
    assert sole_field(payload) == expected
    assert sole_field(memoryview(payload)) == expected
