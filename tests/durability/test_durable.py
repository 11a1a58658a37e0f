"""Durable purgatories in process: restart, recovery, catalog, corruption.

The server is stopped and started again on the same data directory; what survives is
checked through the RPCs. Timers are real here (a restart is about wall-clock due times),
so every operation that must stay pending has a timeout of minutes, and the overdue case
writes its journal directly with a due time in the past.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import Journal, JournalCorruptionError, list_segments
from purgatory_server._service import create_server
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.durable.catalog import journal_dir, write_settings
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.wire.convert import condition_to_proto

from tests.durability.helpers import NAME, durable_config, events_after, running, signal, watch

LONG = 600_000
WATCHING = pb.OperationState.Value("OPERATION_STATE_WATCHING")
COMPLETED = pb.OperationState.Value("OPERATION_STATE_COMPLETED")
EXPIRED = pb.OperationState.Value("OPERATION_STATE_EXPIRED")
FORCED = pb.OperationState.Value("OPERATION_STATE_FORCE_COMPLETED")


def _min_signals(count: int) -> pb.Condition:
    return pb.Condition(min_signals=pb.MinSignalsCondition(count=count, distinct_sources=True))


def _values(target: int) -> pb.Condition:
    return pb.Condition(values_at_least=pb.ValuesAtLeastCondition(default_target=target))


async def _state(stub: object, op_id: str) -> pb.OperationStatus:
    response = await stub.GetOperation(  # type: ignore[attr-defined]
        pb.GetOperationRequest(purgatory=NAME, operation_id=op_id)
    )
    return response.operation


async def test_restart_keeps_pending_progress_values_outcomes_and_sequence(
    tmp_path: Path,
) -> None:
    config = durable_config(tmp_path)
    async with running(config) as stub:
        await stub.TryCompleteElseWatch(watch("a", ["k1"], LONG, _min_signals(3)))
        await stub.TryCompleteElseWatch(watch("c", ["k2"], LONG, _values(10)))
        await stub.TryCompleteElseWatch(watch("f", ["k3"], LONG))
        assert (await stub.CheckAndComplete(signal("k1", source="r1"))).completed == 0
        assert (await stub.CheckAndComplete(signal("k1", source="r2"))).completed == 0
        assert (await stub.CheckAndComplete(signal("k2", value=5))).completed == 0
        forced = await stub.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id="f"))
        assert forced.completed and forced.operation.sequence == 1

    async with running(config) as stub:
        info = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
        assert (info.pending, info.last_sequence) == (2, 1)
        assert (await _state(stub, "a")).state == WATCHING
        # Progress survived: a repeated source does not count, a third one completes "a".
        assert (await stub.CheckAndComplete(signal("k1", source="r2"))).completed == 0
        assert (await stub.CheckAndComplete(signal("k1", source="r3"))).completed == 1
        a = await _state(stub, "a")
        assert (a.state, a.sequence, a.result.signal_count) == (COMPLETED, 2, 3)
        # The key value survived: 5 stays below 10; 10 completes "c".
        assert (await stub.CheckAndComplete(signal("k2", value=7))).completed == 0
        assert (await stub.CheckAndComplete(signal("k2", value=10))).completed == 1
        # The finished "f" is still known: a re-send is idempotent, not a new operation.
        again = await stub.TryCompleteElseWatch(watch("f", ["k3"], LONG))
        assert (again.created, again.state, again.sequence) == (False, FORCED, 1)
        events = await events_after(stub, 0, 3)
        assert [(e.operation_id, e.sequence) for e in events] == [("f", 1), ("a", 2), ("c", 3)]

    async with running(config) as stub:
        info = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
        assert (info.pending, info.last_sequence) == (0, 3)
        events = await events_after(stub, 1, 2)
        assert [e.sequence for e in events] == [2, 3]


def _write_overdue_journal(data_dir: Path, due_wall_ms: int) -> None:
    settings = PurgatorySettings(name=NAME, durable=True, retained_events=1000)
    write_settings(data_dir, settings)
    condition = condition_to_proto(ConditionSpec()).SerializeToString()
    registered = JournalRecord.OperationRegistered(
        purgatory=NAME,
        operation_id="late",
        keys=["k"],
        timeout_ms=1000,
        condition=condition,
        due_wall_ms=due_wall_ms,
        created_wall_ms=due_wall_ms - 1000,
    )
    with Journal.open(journal_dir(data_dir, NAME)) as journal:
        journal.append_sync([JournalRecord(registered=registered)])


async def test_overdue_operation_expires_at_once_and_its_event_shows_lateness(
    tmp_path: Path,
) -> None:
    due = time.time_ns() // 1_000_000 - 60_000  # fell due a minute ago, while "down"
    _write_overdue_journal(tmp_path, due)
    async with running(durable_config(tmp_path)) as stub:
        (event,) = await events_after(stub, 0, 1)
        assert (event.operation_id, event.state, event.sequence) == ("late", EXPIRED, 1)
        assert event.due_time_ms == due
        assert event.complete_time_ms - event.due_time_ms >= 60_000
    # The expiry was journaled with its lateness.
    with Journal.open(journal_dir(tmp_path, NAME)) as journal:
        (outcome,) = journal.recovered.events
        assert outcome.lateness_ms >= 60_000 and not journal.recovered.pending


async def test_purgatory_created_durable_at_runtime_is_recovered_then_deleted(
    tmp_path: Path,
) -> None:
    config = durable_config(tmp_path)
    async with running(config) as stub:
        created = await stub.CreatePurgatory(
            pb.CreatePurgatoryRequest(name="rt", config=pb.PurgatoryConfig(durable=True))
        )
        assert created.purgatory.config.durable
        request = watch("x", ["k"], LONG)
        request.purgatory = "rt"
        await stub.TryCompleteElseWatch(request)
    assert (tmp_path / "rt" / "purgatory.json").exists()
    async with running(config) as stub:
        info = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name="rt"))).purgatory
        assert info.pending == 1 and info.config.durable
        deleted = await stub.DeletePurgatory(pb.DeletePurgatoryRequest(name="rt"))
        assert deleted.cancelled == 1
    assert not (tmp_path / "rt").exists()
    async with running(config) as stub:
        listed = await stub.ListPurgatories(pb.ListPurgatoriesRequest())
        assert [p.name for p in listed.purgatories] == [NAME]


async def test_corrupt_mid_file_record_stops_start_up_unless_repair(tmp_path: Path) -> None:
    config = durable_config(tmp_path)
    async with running(config) as stub:
        for i in range(5):
            await stub.TryCompleteElseWatch(watch(f"op{i}", ["k"], LONG))
    [(_, segment)] = list_segments(journal_dir(tmp_path, NAME))
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(JournalCorruptionError) as info:
        await create_server("127.0.0.1:0", config)
    assert str(segment) in str(info.value) and "offset" in str(info.value)
    repaired = durable_config(tmp_path, repair_journal=True)
    async with running(repaired) as stub:
        info2 = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
        assert 0 < info2.pending < 5  # truncated at the bad record, the rest kept


async def test_in_memory_purgatories_have_no_journal(tmp_path: Path) -> None:
    config = durable_config(tmp_path)
    server, _ = await create_server("127.0.0.1:0", config)
    try:
        server.registry.create(server.registry.settings_for("mem", None))
        assert server.registry.get("mem").barrier is None
        assert server.registry.get(NAME).barrier is not None
        assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]
    finally:
        await server.stop(0.5)
