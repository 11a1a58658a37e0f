"""Worker groups in the journal library: the replay rules, and compaction carrying a
group's whole state so deleting old segments loses no ack, dead letter or attempt."""

from __future__ import annotations

from pathlib import Path

from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig, JournalState

from tests.journal.helpers import out, reg

Settled = JournalRecord.GroupSettled
SMALL = JournalConfig(
    fsync=FsyncPolicy.NEVER, segment_bytes=4096, auto_compact=False, retain_events=5
)


def created(group: str, last_sequence: int = 0) -> JournalRecord:
    return JournalRecord(
        group_state=JournalRecord.GroupState(
            purgatory="p",
            group=group,
            visibility_timeout_ms=1000,
            max_attempts=3,
            last_sequence=last_sequence,
        )
    )


def delivered(group: str, sequence: int, attempt: int, deadline: int = 0) -> JournalRecord:
    return JournalRecord(
        group_delivered=JournalRecord.GroupDelivered(
            purgatory="p",
            group=group,
            sequence=sequence,
            attempt=attempt,
            lease_deadline_wall_ms=deadline,
        )
    )


def settled(group: str, disposition: int, *sequences: int) -> JournalRecord:
    return JournalRecord(
        group_settled=Settled(
            purgatory="p",
            group=group,
            sequences=sequences,
            disposition=disposition,  # type: ignore[arg-type]
        )
    )


def groups_of(state_groups) -> dict[str, tuple[int, list[tuple[int, int, bool]]]]:  # type: ignore[no-untyped-def]
    return {
        name: (g.last_sequence, [(e.outcome.sequence, e.attempts, e.dead) for e in g.entries])
        for name, g in state_groups.items()
    }


def test_replay_rules() -> None:
    state = JournalState(retain_events=100)
    records = [
        out("before", 1),  # before the group: not in it
        created("g", last_sequence=1),
        out("a", 2),
        out("b", 3),
        out("c", 4),
        delivered("g", 2, 1),
        delivered("g", 3, 1, 1_000),
        delivered("g", 3, 2, 2_000),
        delivered("g", 3, 2, 2_500),  # an extension: same attempt, new deadline
        delivered("g", 4, 3, 3_000),
        settled("g", Settled.DISPOSITION_ACKED, 2),
        settled("g", Settled.DISPOSITION_DEAD_LETTERED, 4),
        created("gone"),
        settled("nobody", Settled.DISPOSITION_ACKED, 3),  # unknown group: ignored
        JournalRecord(
            group_state=JournalRecord.GroupState(purgatory="p", group="gone", deleted=True)
        ),
    ]
    for i, record in enumerate(records):
        state.apply(i, record)
    snap = state.snapshot(len(records)).groups
    assert groups_of(snap) == {"g": (4, [(3, 2, False), (4, 3, True)])}
    # The latest lease's deadline is kept (a restart honours it); a dead letter has none.
    assert [e.lease_deadline_wall_ms for e in snap["g"].entries] == [2_500, 0]
    # A redrive keeps the attempt number (a fencing token) and records where the fresh
    # budget starts; the next delivery goes on counting.
    state.apply(99, settled("g", Settled.DISPOSITION_REDRIVEN, 4))
    state.apply(100, delivered("g", 4, 4))
    snap = state.snapshot(101).groups
    assert groups_of(snap) == {"g": (4, [(3, 2, False), (4, 4, False)])}
    assert [e.redriven_at for e in snap["g"].entries] == [0, 3]


def test_compaction_carries_groups_and_reopen_restores_them(tmp_path: Path) -> None:
    with Journal.open(tmp_path, SMALL) as journal:
        journal.append_sync([created("g")])
        seq = 1
        for i in range(200):  # many outcomes, most acked at once: old segments go
            journal.append_sync([reg(f"s{i}", "k"), out(f"s{i}", seq)])
            if i not in (3, 7):
                journal.append_sync([settled("g", Settled.DISPOSITION_ACKED, seq)])
            seq += 1
        journal.append_sync(
            [delivered("g", 4, 3), settled("g", Settled.DISPOSITION_DEAD_LETTERED, 4)]
        )
        journal.append_sync([delivered("g", 8, 1)])
        journal.append_sync([delivered("g", 8, 2), settled("g", Settled.DISPOSITION_REDRIVEN, 8)])
        journal.append_sync([delivered("g", 8, 3, 9_000)])
        expected = groups_of(journal._state.snapshot(0).groups)
        result = journal.compact()
        assert result.deleted_segments >= 3
    assert expected == {"g": (200, [(4, 3, True), (8, 3, False)])}
    with Journal.open(tmp_path, SMALL) as journal:
        recovered = journal.recovered
        assert groups_of(recovered.groups) == expected
        # The carry keeps where the redriven entry's fresh budget starts.
        assert [e.redriven_at for e in recovered.groups["g"].entries] == [0, 2]
        assert [e.lease_deadline_wall_ms for e in recovered.groups["g"].entries] == [0, 9_000]
        # The carried entries keep their outcome records (the event window no longer does).
        (group,) = recovered.groups.values()
        assert [e.outcome.operation_id for e in group.entries] == ["s3", "s7"]
        assert [e.sequence for e in recovered.events] == [196, 197, 198, 199, 200]


def test_rate_windows_replay_and_carry(tmp_path: Path) -> None:
    """A rate-limited group's delivery times come back per rate key, only those within
    its window of the latest one, through replay and through compaction's carry; the
    selection travels as opaque bytes."""
    state = created("g")
    state.group_state.selection = b"\x1a\x04\x08\x02\x10\x64"  # opaque to the journal
    state.group_state.rate_window_ms = 100

    def at(sequence: int, when: int, key: str) -> JournalRecord:
        record = delivered("g", sequence, 1)
        record.group_delivered.delivered_wall_ms = when
        record.group_delivered.rate_key = key
        return record

    def windows(groups) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
        return {w.key: list(w.delivered_wall_ms) for w in groups["g"].rate_windows}

    with Journal.open(tmp_path, SMALL) as journal:
        journal.append_sync([state])
        for i in range(150):  # old segments go; the window's last times stay
            journal.append_sync(
                [reg(f"s{i}", "k"), out(f"s{i}", i + 1), at(i + 1, 1_000 + 10 * i, "ab"[i % 2])]
            )
            journal.append_sync([settled("g", Settled.DISPOSITION_ACKED, i + 1)])
        # An extension (no delivery time) is no delivery; a time recorded out of order
        # (the wall clock stepped back) and already out of the window is dropped.
        journal.append_sync([delivered("g", 150, 1, 99_999), at(150, 5, "c")])
        expected = windows(journal._state.snapshot(0).groups)
        assert journal.compact().deleted_segments >= 3
    last = 1_000 + 10 * 149
    assert expected == {
        "a": [t for t in range(last - 90, last + 1, 10) if (t - 1_000) // 10 % 2 == 0],
        "b": [t for t in range(last - 90, last + 1, 10) if (t - 1_000) // 10 % 2 == 1],
    }
    with Journal.open(tmp_path, SMALL) as journal:
        recovered = journal.recovered.groups
        assert windows(recovered) == expected
        assert recovered["g"].state.selection == state.group_state.selection
        assert recovered["g"].state.rate_window_ms == 100
