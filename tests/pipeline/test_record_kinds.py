"""Record kinds added after the first pipeline: reschedules, worker groups, schedules.

The journal is written by the journal library (the server's own writer), so it holds what
a compaction or a group would leave that the short real-server workload does not produce:
a carried copy of a rescheduled operation, every group record, schedule records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import Journal
from pyspark.sql import functions as F

JR = JournalRecord
P = "k"
T0 = 1_790_000_000_000  # 2026-09-21, epoch ms


def _reg(op_id: str, due: int) -> JournalRecord.OperationRegistered:
    return JR.OperationRegistered(
        purgatory=P,
        operation_id=op_id,
        keys=["a"],
        timeout_ms=60_000,
        condition=pb.Condition().SerializeToString(),
        created_wall_ms=T0,
        due_wall_ms=due,
        extend_on_resend=True,
        max_extend_ms=90_000,
    )


def _moved(op_id: str, due: int) -> JournalRecord:
    return JR(rescheduled=JR.OperationRescheduled(purgatory=P, operation_id=op_id, due_wall_ms=due))


def _outcome(op_id: str, sequence: int, at: int) -> JournalRecord:
    return JR(
        outcome=JR.Outcome(
            purgatory=P,
            operation_id=op_id,
            state=JR.Outcome.STATE_COMPLETED,
            sequence=sequence,
            completed_wall_ms=at,
        )
    )


def _records() -> list[JournalRecord]:
    spec = pb.ScheduleSpec(
        schedule_id="nightly",
        cron="0 3 * * *",
        time_zone="Europe/Paris",
        template=pb.ScheduleTemplate(
            keys=["paid"],
            condition=pb.Condition(min_signals=pb.MinSignalsCondition(count=2)),
        ),
    )
    return [
        # 0..5: "moved" is registered, rescheduled, carried by compaction with the deadline
        # current then, rescheduled again, and completes; a reschedule after its outcome (a
        # later operation reusing nothing) must not count.
        JR(registered=_reg("moved", T0 + 60_000)),
        _moved("moved", T0 + 70_000),
        JR(carried_operation=JR.CarriedOperation(registration=_reg("moved", T0 + 70_000))),
        _moved("moved", T0 + 80_000),
        _outcome("moved", 1, T0 + 5_000),
        _moved("moved", T0 + 99_000),
        # 6..7: "carried": its registration is gone (compacted); the carry has the deadline.
        JR(
            carried_operation=JR.CarriedOperation(
                registration=_reg("carried", T0 + 65_000), source_index=3
            )
        ),
        _moved("carried", T0 + 75_000),
        # 8..: groups and schedules.
        JR(
            group_state=JR.GroupState(
                purgatory=P,
                group="billing",
                visibility_timeout_ms=30_000,
                max_attempts=5,
                last_sequence=1,
                entries=[JR.GroupState.Entry(outcome=JR.Outcome(sequence=1), attempts=1)],
                source_index=4,
            )
        ),
        JR(
            group_delivered=JR.GroupDelivered(
                purgatory=P, group="billing", sequence=1, attempt=2, lease_deadline_wall_ms=T0 + 9
            )
        ),
        JR(
            group_settled=JR.GroupSettled(
                purgatory=P,
                group="billing",
                sequences=[1, 7],
                disposition=JR.GroupSettled.DISPOSITION_DEAD_LETTERED,
            )
        ),
        JR(
            schedule_upserted=JR.ScheduleUpserted(
                purgatory=P,
                schedule_id="nightly",
                definition=spec.SerializeToString(),
                upserted_wall_ms=T0 + 1,
            )
        ),
        JR(
            schedule_upserted=JR.ScheduleUpserted(
                purgatory=P,
                schedule_id="tick",
                definition=pb.ScheduleSpec(schedule_id="tick", every_ms=500).SerializeToString(),
                upserted_wall_ms=T0 + 2,
                carried=True,
                source_index=2,
            )
        ),
        JR(
            schedule_deleted=JR.ScheduleDeleted(
                purgatory=P, schedule_id="tick", deleted_wall_ms=T0 + 3
            )
        ),
    ]


def _write(directory: Path) -> Path:
    journal = Journal.open(directory)
    try:
        journal.append_sync(_records(), timeout=30)
    finally:
        journal.close()
    return directory


def test_new_kinds_are_read_with_their_fields(spark: Any, tmp_path: Path) -> None:
    from purgatory_pipeline.ingest import read_journal
    from purgatory_pipeline.tables import operations_table

    raw = read_journal(spark, [str(_write(tmp_path / "journal"))]).cache()
    try:
        kinds = {r["kind"]: r["count"] for r in raw.groupBy("kind").count().collect()}
        assert kinds == {
            "registered": 1,
            "rescheduled": 4,
            "carried_operation": 2,
            "outcome": 1,
            "group_state": 1,
            "group_delivered": 1,
            "group_settled": 1,
            "schedule_upserted": 2,
            "schedule_deleted": 1,
        }

        def rows(kind: str, *columns: str) -> list[tuple[Any, ...]]:
            df = raw.filter(F.col("kind") == kind).orderBy("index")
            return [tuple(r) for r in df.select("index", "purgatory", *columns).collect()]

        assert rows("rescheduled", "operation_id", "due_wall_ms") == [
            (1, P, "moved", T0 + 70_000),
            (3, P, "moved", T0 + 80_000),
            (5, P, "moved", T0 + 99_000),
            (7, P, "carried", T0 + 75_000),
        ]
        assert rows("registered", "extend_on_resend", "max_extend_ms") == [(0, P, True, 90_000)]
        assert rows(
            "group_state",
            "group_name",
            "visibility_timeout_ms",
            "max_attempts",
            "sequence",
            "group_entries",
            "source_index",
            "deleted",
        ) == [(8, P, "billing", 30_000, 5, 1, 1, 4, False)]
        assert rows("group_delivered", "group_name", "sequence", "attempt", "due_wall_ms") == [
            (9, P, "billing", 1, 2, T0 + 9)
        ]
        assert rows("group_settled", "group_name", "sequences", "disposition") == [
            (10, P, "billing", [1, 7], "DEAD_LETTERED")
        ]
        assert rows(
            "schedule_upserted",
            "schedule_id",
            "every_ms",
            "cron",
            "time_zone",
            "keys",
            "condition_kind",
            "condition_target",
            "applied_wall_ms",
            "carried",
            "source_index",
        ) == [
            (
                11,
                P,
                "nightly",
                None,
                "0 3 * * *",
                "Europe/Paris",
                ["paid"],
                "min_signals",
                2,
                T0 + 1,
                False,
                0,
            ),
            (12, P, "tick", 500, None, None, [], "any_key", None, T0 + 2, True, 2),
        ]
        assert rows("schedule_deleted", "schedule_id", "applied_wall_ms") == [
            (13, P, "tick", T0 + 3)
        ]

        ops = operations_table(raw)
        got = {
            r["operation_id"]: tuple(r)[1:]
            for r in ops.select(
                "operation_id",
                "due_wall_ms",
                "registered_due_wall_ms",
                "rescheduled",
                "registered_from",
                "state",
            ).collect()
        }
        assert got == {
            # The last move before the outcome; the carried copy in between is no move.
            "moved": (T0 + 80_000, T0 + 60_000, 2, "registered", "COMPLETED"),
            # Registration compacted away: the carried copy is the earliest known deadline.
            "carried": (T0 + 75_000, T0 + 65_000, 1, "carried_operation", "WATCHING"),
        }
    finally:
        raw.unpersist()
