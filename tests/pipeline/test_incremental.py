"""Incremental ingest rewrites only what new segments change, and equals a full run.

A journal written segment by segment with operations that span segments: an outcome in a
later segment than its registration, a deadline moved in another segment, an id
registered again after its outcome, a second purgatory's journal that never changes.
After each step the incremental tables must equal a full run's over the same journal,
and the partitions no new record can change must keep their very files. The merge's id
lookups run both ways: with pyarrow in the driver (where it reaches the tables) and as
Spark joins (elsewhere).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from purgatory_pipeline import ingest as ingest_module
from purgatory_pipeline.id_lookup import ArrowTables
from purgatory_pipeline.ingest import ingest, read_table
from purgatory_proto.v1 import purgatory_pb2
from purgatory_proto.v1.journal_pb2 import JournalRecord as JR
from purgatory_server._journal.framing import encode_frame, encode_header

T0 = 1_790_035_200_000 - 30_000  # 30 s before a UTC midnight: rows fall on two dates
CONDITION = purgatory_pb2.Condition(any_key=purgatory_pb2.AnyKeyCondition())
ANY = CONDITION.SerializeToString()


def _registered(purgatory: str, op: str, at: int) -> JR:
    return JR(
        registered=JR.OperationRegistered(
            purgatory=purgatory,
            operation_id=op,
            keys=[f"k-{op}"],
            timeout_ms=60_000,
            condition=ANY,
            created_wall_ms=T0 + at,
            due_wall_ms=T0 + at + 60_000,
        )
    )


def _outcome(purgatory: str, op: str, at: int, sequence: int) -> JR:
    event = purgatory_pb2.OperationEvent(
        sequence=sequence,
        purgatory=purgatory,
        operation_id=op,
        state=purgatory_pb2.OPERATION_STATE_COMPLETED,
        keys=[f"k-{op}"],
        create_time_ms=T0,
        due_time_ms=T0 + 60_000,
        complete_time_ms=T0 + at,
    )
    journaled = purgatory_pb2.JournaledOutcome(event=event, condition=CONDITION, timeout_ms=60_000)
    return JR(
        outcome=JR.Outcome(
            purgatory=purgatory,
            operation_id=op,
            state=JR.Outcome.STATE_COMPLETED,
            result=journaled.SerializeToString(),
            sequence=sequence,
            completed_wall_ms=T0 + at,
        )
    )


def _rescheduled(purgatory: str, op: str, due: int) -> JR:
    return JR(
        rescheduled=JR.OperationRescheduled(purgatory=purgatory, operation_id=op, due_wall_ms=due)
    )


def _signal(purgatory: str, at: int) -> JR:
    return JR(
        signal=JR.SignalApplied(purgatory=purgatory, key="k", source="r", applied_wall_ms=T0 + at)
    )


class Journal:
    """Segments written as the server rolls them: each new one starts at the next index."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True)
        self.next_index = 0
        self.head: Path | None = None

    def roll(self, records: list[JR]) -> None:
        self.head = self.directory / f"{self.next_index:020d}.seg"
        self.head.write_bytes(encode_header(self.next_index))
        self.grow(records)

    def grow(self, records: list[JR]) -> None:
        assert self.head is not None
        with self.head.open("ab") as handle:
            for record in records:
                handle.write(encode_frame(record.SerializeToString()))
        self.next_index += len(records)


def _rows(spark: Any, tables: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {
        name: sorted(map(tuple, read_table(spark, str(tables), name).collect()))
        for name in ("operations", "signals", "events")
    }


def _files(tables: Path) -> dict[str, float]:
    return {str(p.relative_to(tables)): p.stat().st_mtime_ns for p in tables.rglob("*.parquet")}


def _full(spark: Any, data: Path, scratch: Path) -> dict[str, list[tuple[Any, ...]]]:
    if scratch.exists():
        shutil.rmtree(scratch)
    ingest(spark, [str(data)], str(scratch), full=True)
    return _rows(spark, scratch)


def _lookups(monkeypatch: pytest.MonkeyPatch, lookups: str) -> list[str]:
    """Route the merge's lookups one way; the pyarrow lookups' calls, as they happen."""
    calls: list[str] = []
    if lookups == "spark":
        monkeypatch.setattr(ingest_module, "_arrow_tables", lambda spark, out: None)
        return calls
    for name in ("homes", "elsewhere"):
        method = getattr(ArrowTables, name)

        def counted(self: ArrowTables, keys: Any, _method: Any = method, _name: str = name) -> Any:
            calls.append(_name)
            return _method(self, keys)

        monkeypatch.setattr(ArrowTables, name, counted)
    return calls


@pytest.mark.parametrize("lookups", ["pyarrow", "spark"])
def test_incremental_runs_rewrite_only_what_changed_and_equal_a_full_run(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lookups: str
) -> None:
    arrow_calls = _lookups(monkeypatch, lookups)
    data, tables, scratch = tmp_path / "data", tmp_path / "tables", tmp_path / "full"
    p, q = Journal(data / "p" / "journal"), Journal(data / "q" / "journal")
    q.roll([_registered("q", "q1", 1), _signal("q", 2), _outcome("q", "q1", 3, 1)])
    p.roll(
        [
            _registered("p", "x", 1),
            _registered("p", "w", 2),
            _outcome("p", "w", 3, 1),
            _signal("p", 4),
            _registered("p", "a", 5),
        ]
    )
    p.roll(
        [
            _outcome("p", "x", 40_000, 2),
            _registered("p", "w", 40_001),  # w again
            _registered("p", "y", 40_002),
            _rescheduled("p", "a", T0 + 90_000),
        ]
    )
    p.roll([_registered("p", "z", 40_010), _outcome("p", "z", 40_011, 3)])
    first = ingest(spark, [str(data)], str(tables))
    assert first.segments_decoded == 4
    assert _rows(spark, tables) == _full(spark, data, scratch)
    before = _files(tables)

    # A new segment completes y (registered one segment back): only y's home and the new
    # segment are rebuilt. x (outcome in that home) and w (registered again there) keep
    # their rows homed in the first segment, once each.
    p.roll([_outcome("p", "y", 40_020, 4), _signal("p", 40_021)])
    second = ingest(spark, [str(data)], str(tables))
    assert second.segments_decoded == 1
    rows = _rows(spark, tables)
    assert rows == _full(spark, data, scratch)
    ids = [
        row[0]
        for row in read_table(spark, str(tables), "operations").select("operation_id").collect()
    ]
    assert sorted(ids) == ["a", "q1", "w", "x", "y", "z"]
    after = _files(tables)
    kept = {name for name in before if after.get(name) == before[name]}
    untouched = {name for name in before if "purgatory=q" in name or name.startswith("_records")}
    assert untouched <= kept
    ops = [name for name in before if name.startswith("operations/purgatory=p")]
    assert len(ops) > len([name for name in ops if name not in kept]) > 0

    # The head grows: it is decoded again; a (registered in the first segment) completes.
    p.grow(
        [
            _outcome("p", "a", 40_030, 5),
            _registered("p", "v", 40_031),
            _rescheduled("p", "v", T0 + 99_000),
        ]
    )
    third = ingest(spark, [str(data)], str(tables))
    assert third.segments_decoded == 1
    assert _rows(spark, tables) == _full(spark, data, scratch)
    assert ingest(spark, [str(data)], str(tables)).segments_decoded == 0
    assert _rows(spark, tables) == _full(spark, data, scratch)
    # Two merges, each asking both questions, the way the test routed them.
    assert arrow_calls == (["homes", "elsewhere"] * 2 if lookups == "pyarrow" else [])
