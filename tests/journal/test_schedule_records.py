"""Schedule records in the journal: replay replaces/forgets, compaction carries them."""

from __future__ import annotations

from pathlib import Path

from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig, JournalState

from tests.journal.helpers import out, reg, sig

SMALL = {"fsync": FsyncPolicy.NEVER, "segment_bytes": 4096, "auto_compact": False}


def upsert(sid: str, definition: bytes) -> JournalRecord:
    return JournalRecord(
        schedule_upserted=JournalRecord.ScheduleUpserted(
            purgatory="p", schedule_id=sid, definition=definition, upserted_wall_ms=5
        )
    )


def delete(sid: str) -> JournalRecord:
    return JournalRecord(
        schedule_deleted=JournalRecord.ScheduleDeleted(purgatory="p", schedule_id=sid)
    )


def test_replay_keeps_the_latest_upsert_and_forgets_deleted_schedules() -> None:
    state = JournalState(retain_events=10)
    records = [upsert("a", b"1"), upsert("b", b"x"), upsert("a", b"2"), delete("b"), delete("zz")]
    for index, record in enumerate(records):
        state.apply(index, record)
    snap = state.snapshot(len(records))
    assert {sid: u.definition for sid, u in snap.schedules.items()} == {"a": b"2"}


def test_compaction_carries_a_schedule_whose_upsert_is_in_a_deleted_segment(
    tmp_path: Path,
) -> None:
    config = JournalConfig(retain_events=5, **SMALL)  # type: ignore[arg-type]
    with Journal.open(tmp_path, config) as journal:
        journal.append_sync([upsert("daily", b"def"), upsert("gone", b"g")])
        journal.append_sync([delete("gone")])
        seq = 1
        for i in range(300):
            journal.append_sync([reg(f"s{i}", "hot"), sig("hot", 1)])
            journal.append_sync([out(f"s{i}", seq)])
            seq += 1
        result = journal.compact()
        assert result.deleted_segments >= 3
    with Journal.open(tmp_path, JournalConfig(retain_events=5)) as journal:
        schedules = journal.recovered.schedules
        assert list(schedules) == ["daily"]
        assert schedules["daily"].definition == b"def"
        assert schedules["daily"].carried is True
        assert schedules["daily"].upserted_wall_ms == 5
