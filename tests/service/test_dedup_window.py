"""The dedup window: a finished id is remembered for a time (not the last N), within a
byte cap whose early evictions are counted, and a durable purgatory keeps it across a
restart."""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path

from purgatory_client import AsyncPurgatoryClient, OperationSpec, OperationState
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.core.finished_ids import FinishedIds, entry_bytes
from purgatory_server._service.model.conditions import ConditionKind, ConditionSpec
from purgatory_server._service.model.conditions import ResultSnapshot as Result
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState as ServerState
from purgatory_server._service.model.outcome import Outcome

from tests.durability.helpers import NAME, durable_config, running, watch
from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG

LONG = 600_000
# More finished ids than a count-based memory of the test limits kept (100) and than
# the durable event window below (retained_events=20).
FLOOD = 150


def _config(**settings: int) -> object:
    purgatory = replace(TEST_CONFIG.purgatories[0], max_pending=FLOOD + 10, **settings)
    return replace(TEST_CONFIG, purgatories=(purgatory,), defaults=purgatory)


async def _flood(client: AsyncPurgatoryClient, prefix: str) -> None:
    """End ``FLOOD`` other operations (registered, then force-completed in a batch)."""
    specs = [
        OperationSpec((f"{prefix}{i}",), LONG, operation_id=f"{prefix}{i}") for i in range(FLOOD)
    ]
    await client.batch_try_complete_else_watch(specs)
    for i in range(FLOOD):
        await client.force_complete(f"{prefix}{i}")


async def test_a_resend_inside_the_window_returns_the_recorded_outcome(serve: ServeFn) -> None:
    _, port = await serve(config=_config())
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        first = await client.try_complete_else_watch(["k"], LONG, operation_id="keep")
        assert first.created
        await client.force_complete("keep")
        await _flood(client, "other")
        again = await client.try_complete_else_watch(["k"], LONG, operation_id="keep")
        # The recorded outcome, not a second registration.
        assert (again.created, again.state) == (False, OperationState.FORCE_COMPLETED)
        assert again.sequence == 1
        info = await client.get_purgatory()
        assert (info.pending, info.last_sequence) == (0, FLOOD + 1)


async def test_past_the_byte_cap_the_oldest_go_first_and_are_counted(serve: ServeFn) -> None:
    # Room for about 40 of the flood's entries: the first ones are evicted inside their
    # (5-minute) window.
    server, port = await serve(config=_config(dedup_max_bytes=40 * 460))
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        await _flood(client, "x")
        table = server.registry.get("default")._table.finished  # type: ignore[attr-defined]
        assert table.bytes <= 40 * 460
        assert "x0" not in table and f"x{FLOOD - 1}" in table
        gauges = server.registry.get("default").gauges()  # type: ignore[attr-defined]
        assert gauges.dedup_evicted == FLOOD - gauges.dedup_ids > 0
        again = await client.try_complete_else_watch(["x0"], LONG, operation_id="x0")
        assert again.created  # documented: past the cap, an id is unknown again


def _outcome(op_id: str, complete_ms: int) -> tuple[OperationDefinition, Outcome]:
    definition = OperationDefinition(("k",), 1000, ConditionSpec(), b"p")
    outcome = Outcome(1, "p", op_id, ServerState.EXPIRED, ("k",), b"p", Result(), 0, 0, complete_ms)
    return definition, outcome


def test_the_window_is_a_time_not_a_count() -> None:
    ids = FinishedIds(window_ms=1000, max_bytes=1 << 30)
    for i in range(50_000):  # far more than any count-based memory kept
        ids.add(*_outcome(f"a{i}", 10_000))
    ids.trim()
    assert len(ids) == 50_000 and ids.evicted_early == 0
    ids.add(*_outcome("late", 11_000))  # exactly the window later: all still inside
    ids.trim()
    assert len(ids) == 50_001
    ids.add(*_outcome("later", 11_001))  # past it: the first ones are forgotten
    ids.trim()
    assert list(ids.entries) == ["late", "later"]
    assert ids.evicted_early == 0
    assert ids.bytes == sum(entry_bytes(*ids.get(i)) for i in ids.entries)  # type: ignore[misc]


async def test_a_remembered_entry_is_rebuilt_equal_and_costs_the_collector_nothing() -> None:
    # Packed into one plain tuple (core/finished_ids.py): equal records come back, and the
    # collector stops tracking the entry after one pass (a full collection skips it).
    condition = ConditionSpec(ConditionKind.MIN_SIGNALS, count=3, distinct_sources=True)
    definition = OperationDefinition(("a", "b"), 500, condition, b"pay", 0, True, 900)
    result = Result(3, ("s1", "s2"), ("a",), 7, (("a", 4),), b"data", False)
    outcome = Outcome(
        9, "p", "x", ServerState.COMPLETED, ("a", "b"), b"pay", result, 1, 2, 3, "00-trace-01", 77
    )
    ids = FinishedIds(window_ms=1000, max_bytes=1 << 30)
    ids.add(definition, outcome)
    got = ids.get("x")
    assert got is not None
    assert got == (definition, outcome)
    assert got[1].traceparent == "00-trace-01" and got[1].nbytes == 77
    assert got[1].result.data is result.data  # shared, never copied (core/signal_data.py)
    assert got[0][5:] == (True, 900)  # the fields equality does not compare
    plain = _outcome("y", 5)
    ids.add(*plain)
    assert ids.get("y") == plain
    gc.collect()  # one pass: an entry holds no tuple the pass could reach after it
    assert not any(gc.is_tracked(e) for e in ids.entries.values())
    listed = list(ids.listed(None, {ServerState.COMPLETED}, lambda keys, op_id, due: True))
    assert listed == [("x", outcome)]


async def test_a_durable_window_survives_a_restart(tmp_path: Path) -> None:
    """(Compaction keeping it: tests/journal/test_compaction.py.)"""
    settings = PurgatorySettings(name=NAME, durable=True, retained_events=20)
    config = replace(durable_config(tmp_path), purgatories=(settings,))
    async with running(config) as stub:
        await stub.TryCompleteElseWatch(watch("keep", ["k"], LONG))
        await stub.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id="keep"))
        for i in range(FLOOD):
            await stub.TryCompleteElseWatch(watch(f"o{i}", ["k"], 1))
    async with running(config) as stub:
        again = await stub.TryCompleteElseWatch(watch("keep", ["k"], LONG))
        assert (again.created, again.sequence) == (False, 1)
        assert again.state == pb.OperationState.Value("OPERATION_STATE_FORCE_COMPLETED")
        info = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
        assert info.pending == 0
