"""Schedules of a durable purgatory survive restarts: a graceful one on MockTime (exact
fire times) and a kill -9 of a real server process (real time, tolerant bounds).

Catch-up policy under test: the occurrence that fell due during the downtime fires once,
at once, on restart; the other missed fire times are skipped.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from purgatory_client import AsyncPurgatoryClient, Event, NotFoundError, OperationState
from purgatory_server import MockTime
from purgatory_server._journal import Journal
from purgatory_server._service import create_server
from purgatory_server._service.durable.catalog import journal_dir
from purgatory_server._service.durable.schedule_records import upserted_record
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.schedules.definition import ScheduleDefinition

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME, durable_config

START = 1_700_000_000_000


async def _events(client: AsyncPurgatoryClient, count: int) -> list[Event]:
    async def take() -> list[Event]:
        out: list[Event] = []
        async for event in client.subscribe(after_sequence=0, purgatory=NAME):
            out.append(event)
            if len(out) >= count:
                break
        return out

    return await asyncio.wait_for(take(), 10)


async def _until_state(
    client: AsyncPurgatoryClient, op_id: str, bound_s: float = 10.0
) -> OperationState:
    deadline = time.monotonic() + bound_s
    while True:
        try:
            state = (await client.get_operation(op_id, purgatory=NAME)).state
        except NotFoundError:
            state = OperationState.UNSPECIFIED
        if state.is_final or time.monotonic() > deadline:
            return state
        await asyncio.sleep(0.05)


async def test_restart_recovers_the_schedule_and_fires_a_missed_time_once(
    tmp_path: Path,
) -> None:
    clock = MockTime()
    config = durable_config(tmp_path)
    server, port = await create_server("127.0.0.1:0", config, time=clock, reaper_enabled=False)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            await c.upsert_schedule("bill", every_ms=1_000, payload=b"run billing")
            await c.upsert_schedule("gone", every_ms=1_000)
            await c.delete_schedule("gone")
            clock.sleep(1_000)
            server.registry.get(NAME).advance_clock(0)
            (listed,) = await c.list_schedules()
            assert listed.next_operation_id == f"bill@{START + 2_000}"
    finally:
        await server.stop(0.5)
    clock.sleep(3_500)  # down while START + 2000, 3000 and 4000 pass
    server, port = await create_server("127.0.0.1:0", config, time=clock, reaper_enabled=False)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            assert await _until_state(c, f"bill@{START + 2_000}") is OperationState.EXPIRED
            (listed,) = await c.list_schedules()
            assert listed.schedule_id == "bill"
            assert listed.payload == b"run billing"
            assert listed.next_operation_id == f"bill@{START + 5_000}"
            for missed in (3_000, 4_000):
                with pytest.raises(NotFoundError):
                    await c.get_operation(f"bill@{START + missed}")
            clock.sleep(500)
            server.registry.get(NAME).advance_clock(0)
            events = await _events(c, 4)
            assert [(e.operation_id, e.state) for e in events] == [
                (f"gone@{START + 1_000}", OperationState.CANCELLED),
                (f"bill@{START + 1_000}", OperationState.EXPIRED),
                (f"bill@{START + 2_000}", OperationState.EXPIRED),
                (f"bill@{START + 5_000}", OperationState.EXPIRED),
            ]
            assert events[2].complete_time_ms == START + 4_500  # late, at once on restart
    finally:
        await server.stop(0.5)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_kill_9_keeps_the_schedule_and_fires_the_missed_time_once(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    server = DurableServer(data_dir, "always", log)
    try:
        port = server.wait_port()
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            # Upsert just after a whole second, so the first firing is ~900 ms away and the
            # kill below surely comes before it.
            await asyncio.sleep((1_100 - _now_ms() % 1_000) % 1_000 / 1000)
            up = await c.upsert_schedule("tick", every_ms=1_000, payload=b"t")
        first = up.schedule.next_fire_time_ms
        server.kill()  # acknowledged, so journaled (fsync always); then SIGKILL
        assert _now_ms() < first, "killed only after the first firing (machine overloaded)"
        # Stay down until the armed time and the one after it have both passed.
        await asyncio.sleep(max(0.0, (first + 1_000 + 150 - _now_ms()) / 1000))
        restarted = _now_ms()
        server = DurableServer(data_dir, "always", log)
        port = server.wait_port()
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            assert await _until_state(c, f"tick@{first}") is OperationState.EXPIRED
            with pytest.raises(NotFoundError):
                await c.get_operation(f"tick@{first + 1_000}")  # skipped, never armed
            (listed,) = await c.list_schedules()
            assert listed.next_fire_time_ms > restarted
            # It goes on: the next occurrence fires on time after the restart.
            later = listed.next_operation_id
            assert await _until_state(c, later) is OperationState.EXPIRED
            events = await _events(c, 2)
            # The missed time once, then the first occurrence armed after the restart: on
            # a loaded machine that one may have fired before list_schedules answered, so
            # `later` is it or one after it, on the same one-second grid.
            missed, after = (e.operation_id for e in events)
            assert missed == f"tick@{first}"
            fired = int(after.removeprefix("tick@"))
            assert fired > first + 1_000 and (fired - first) % 1_000 == 0, after
            assert fired <= int(later.removeprefix("tick@")), (after, later)
            assert events[0].complete_time_ms >= restarted  # fired once, after the restart
            cancelled = await c.delete_schedule("tick")
            assert cancelled is not None
            assert cancelled.state is OperationState.CANCELLED
            assert await c.list_schedules() == []
    finally:
        server.stop()


async def test_a_schedule_journaled_without_its_occurrence_arms_one_on_restart(
    tmp_path: Path,
) -> None:
    """A crash between an occurrence's outcome and the next registration leaves only the
    schedule in the journal: the restart arms the first fire time after now."""
    clock = MockTime()
    config = durable_config(tmp_path)
    server, _ = await create_server("127.0.0.1:0", config, time=clock, reaper_enabled=False)
    await server.stop(0.5)
    definition = ScheduleDefinition("lone", 60_000, "", "", (), ConditionSpec(), b"x")
    with Journal.open(journal_dir(tmp_path, NAME)) as journal:
        journal.append_sync([upserted_record(NAME, definition, START)])
    clock.sleep(125_000)
    server, port = await create_server("127.0.0.1:0", config, time=clock, reaper_enabled=False)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            (listed,) = await c.list_schedules()
            fire = (START + 125_000) // 60_000 * 60_000 + 60_000
            assert (listed.next_operation_id, listed.payload) == (f"lone@{fire}", b"x")
            status = await c.get_operation(listed.next_operation_id)
            assert (status.state, status.due_time_ms) == (OperationState.WATCHING, fire)
    finally:
        await server.stop(0.5)
