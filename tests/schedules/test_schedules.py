"""Schedules end to end on a real in-process server whose purgatory runs on MockTime.

The timer is driven by hand (``clock.sleep`` then ``advance_clock(0)``), so each firing
happens exactly when the test says and every expected occurrence id is known up front.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    Condition,
    Event,
    InvalidArgumentError,
    NotFoundError,
    OperationState,
    PurgatoryClient,
    ResourceExhaustedError,
    Signal,
)
from purgatory_server import MockTime
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.schedules import table as schedule_table_module
from purgatory_server._service.schedules.definition import ScheduleDefinition

from tests.service.helpers import TEST_CONFIG

START = 1_700_000_000_000  # MockTime's wall clock at start: a multiple of every interval here


async def _events(client: AsyncPurgatoryClient, count: int) -> list[Event]:
    """The first ``count`` retained outcomes (bounded)."""

    async def take() -> list[Event]:
        out: list[Event] = []
        async for event in client.subscribe(after_sequence=0):
            out.append(event)
            if len(out) >= count:
                break
        return out

    return await asyncio.wait_for(take(), 5)


async def _started(serve: Any) -> tuple[Any, MockTime, Any, int]:
    clock = MockTime()
    server, port = await serve(TEST_CONFIG, time=clock, reaper_enabled=False)
    return server, clock, server.registry.get("default"), port


def _step(clock: MockTime, purgatory: Any, ms: int) -> None:
    clock.sleep(ms)
    purgatory.advance_clock(0)


async def test_every_ms_fires_with_deterministic_ids(serve: Any) -> None:
    _, clock, purgatory, port = await _started(serve)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        up = await client.upsert_schedule("beat", every_ms=1_000, keys=["k"], payload=b"p")
        assert (up.created, up.changed) == (True, True)
        assert up.schedule.next_operation_id == f"beat@{START + 1_000}"
        assert up.schedule.next_fire_time_ms == START + 1_000
        _step(clock, purgatory, 999)
        pending = await client.get_operation(f"beat@{START + 1_000}")
        assert pending.state is OperationState.WATCHING
        for _ in range(3):
            _step(clock, purgatory, 1_000 if _ else 1)
        events = await _events(client, 3)
        assert [e.operation_id for e in events] == [f"beat@{START + n * 1_000}" for n in (1, 2, 3)]
        assert all(e.state is OperationState.EXPIRED and e.payload == b"p" for e in events)
        assert [e.due_time_ms for e in events] == [START + n * 1_000 for n in (1, 2, 3)]
        (listed,) = await client.list_schedules()
        assert listed.next_operation_id == f"beat@{START + 4_000}"
        assert (await client.get_purgatory("default")).pending == 1
        # Signalling the template's key completes the armed occurrence early ("unless");
        # the next one is still armed for the following fire time, not earlier.
        assert await client.check_and_complete("k", Signal(source="x")) == 1
        (listed,) = await client.list_schedules()
        assert listed.next_operation_id == f"beat@{START + 5_000}"
        done = await client.get_operation(f"beat@{START + 4_000}")
        assert done.state is OperationState.COMPLETED
        # Cancelling the armed occurrence skips that one firing; the schedule goes on.
        (cancelled,) = await client.cancel([f"beat@{START + 5_000}"])
        assert cancelled.state is OperationState.CANCELLED
        (listed,) = await client.list_schedules()
        assert listed.next_operation_id == f"beat@{START + 6_000}"


async def test_two_clients_upserting_one_schedule_never_double_an_occurrence(serve: Any) -> None:
    _, clock, purgatory, port = await _started(serve)
    address = f"127.0.0.1:{port}"
    async with (
        AsyncPurgatoryClient(address, timeout=10) as a,
        AsyncPurgatoryClient(address, timeout=10) as b,
    ):
        results = await asyncio.gather(
            *(c.upsert_schedule("report", every_ms=2_000, payload=b"r") for c in (a, b, a, b))
        )
        assert sorted(r.created for r in results) == [False, False, False, True]
        assert sum(r.changed for r in results) == 1
        assert len(await a.list_schedules()) == 1
        assert (await a.get_purgatory("default")).pending == 1
        for _ in range(3):
            _step(clock, purgatory, 2_000)
            # A producer re-upserting between firings changes nothing.
            again = await b.upsert_schedule("report", every_ms=2_000, payload=b"r")
            assert again.changed is False
        # A second producer with another definition replaces it: still one occurrence.
        other = await b.upsert_schedule("report", every_ms=3_000, payload=b"r")
        assert (other.created, other.changed) == (False, True)
        assert (await a.get_purgatory("default")).pending == 1
        _step(clock, purgatory, 6_000)
        events = await _events(a, 5)
        ids = [e.operation_id for e in events]
        assert len(ids) == len(set(ids))
        assert ids[:3] == [f"report@{START + n * 2_000}" for n in (1, 2, 3)]
        # The occurrence armed under every 2000 ms (8000) was replaced: CANCELLED; the new
        # definition fires on the epoch's grid of 3000 ms: START + 7000 is the first after.
        assert (ids[3], events[3].state) == (f"report@{START + 8_000}", OperationState.CANCELLED)
        assert (ids[4], events[4].state) == (f"report@{START + 7_000}", OperationState.EXPIRED)


async def test_upsert_keeps_an_armed_occurrence_due_at_the_same_time(serve: Any) -> None:
    _, _, _, port = await _started(serve)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        first = await client.upsert_schedule("s", every_ms=1_000, payload=b"old")
        second = await client.upsert_schedule("s", every_ms=1_000, payload=b"new")
        assert second.changed is True
        assert second.schedule.payload == b"new"
        assert second.schedule.next_operation_id == first.schedule.next_operation_id
        assert (await client.get_purgatory("default")).pending == 1


async def test_delete_stops_the_schedule(serve: Any) -> None:
    _, clock, purgatory, port = await _started(serve)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        await client.upsert_schedule("gone", every_ms=1_000)
        _step(clock, purgatory, 1_000)
        cancelled = await client.delete_schedule("gone")
        assert cancelled is not None
        assert cancelled.operation_id == f"gone@{START + 2_000}"
        assert cancelled.state is OperationState.CANCELLED
        assert await client.list_schedules() == []
        _step(clock, purgatory, 5_000)
        assert (await client.get_purgatory("default")).pending == 0
        events = await _events(client, 2)
        assert [e.operation_id for e in events] == [f"gone@{START + 1_000}", cancelled.operation_id]
        with pytest.raises(NotFoundError, match="schedule 'gone' not found"):
            await client.delete_schedule("gone")


async def test_cron_schedule_in_a_zone_arms_its_local_fire_time(serve: Any) -> None:
    _, _, _, port = await _started(serve)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        # MockTime starts at 2023-11-14T22:13:20Z = 17:13:20 in New York (EST, UTC-5).
        up = await client.upsert_schedule("ny", cron="0 18 * * *", time_zone="America/New_York")
        assert up.schedule.next_fire_time_ms == 1_700_002_800_000  # 23:00Z
        assert up.schedule.cron == "0 18 * * *"
        assert up.schedule.time_zone == "America/New_York"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"every_ms": 99}, "schedule.every_ms"),
        ({"cron": "0 9 * *"}, "schedule.cron"),
        ({"cron": "0 0 30 2 *"}, "schedule.cron"),
        ({"cron": "0 9 * * *", "time_zone": "Nowhere/Atlantis"}, "schedule.time_zone"),
        ({"every_ms": 1_000, "time_zone": "Europe/Paris"}, "schedule.time_zone"),
        (
            {"every_ms": 1_000, "keys": ["a"], "condition": Condition.values_at_least()},
            "schedule.template.condition",
        ),
        (
            {"every_ms": 1_000, "keys": ["a"], "condition": Condition.sum_at_least(0)},
            "schedule.template.condition",
        ),
    ],
)
def test_invalid_schedules_name_the_field(
    server_thread: Any, kwargs: dict[str, Any], field: str
) -> None:
    with PurgatoryClient(server_thread.target, timeout=10) as client:
        with pytest.raises(InvalidArgumentError) as info:
            client.upsert_schedule("bad", **kwargs)
        assert info.value.field_violations[0][0] == field
        assert client.list_schedules() == []


async def test_schedules_per_purgatory_are_capacity(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedule_table_module, "MAX_SCHEDULES", 2)
    _, _, _, port = await _started(serve)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        await client.upsert_schedule("a", every_ms=1_000)
        await client.upsert_schedule("b", every_ms=1_000)
        with pytest.raises(ResourceExhaustedError, match="2 schedules"):
            await client.upsert_schedule("c", every_ms=1_000)
        await client.upsert_schedule("b", every_ms=2_000)  # replacing is not a new one
        await client.delete_schedule("a")
        await client.upsert_schedule("c", every_ms=1_000)
        assert [s.schedule_id for s in await client.list_schedules()] == ["b", "c"]


async def test_replacing_while_the_old_occurrence_is_ending_arms_nothing_for_the_old(
    serve: Any,
) -> None:
    """The old occurrence expired on the timer thread but is not yet published when the
    upsert runs (its registration publishes it): its end must not arm another occurrence
    of the old definition (which the upsert would then have to cancel again)."""
    _, clock, purgatory, port = await _started(serve)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        await client.upsert_schedule("s", every_ms=1_000, payload=b"old")
        clock.sleep(1_000)
        purgatory.engine.advance_clock(0)
        purgatory.engine.timer._wait_executor_idle(10.0)  # expired, waiting in the inbox
        new = ScheduleDefinition("s", 3_000, "", "", (), ConditionSpec(), b"new")
        entry, created, changed = purgatory.schedules.upsert(new)  # no await: same turn
        assert (created, changed) == (False, True)
        assert entry.occurrence_id == f"s@{START + 4_000}"  # the 3000 ms grid after now
        info = await client.get_purgatory("default")
        assert (info.pending, info.last_sequence) == (1, 1)  # one outcome: nothing cancelled
        events = await _events(client, 1)
        assert [(e.operation_id, e.state) for e in events] == [
            (f"s@{START + 1_000}", OperationState.EXPIRED)
        ]
        (listed,) = await client.list_schedules()
        assert listed.next_operation_id == entry.occurrence_id
