"""Cron aliases mean their classic times (``@daily`` is ``0 0 * * *``), on a real
in-process server on MockTime, driven across a day by explicit clock steps (no sleeps).
Hashing happens only where asked, with ``H`` fields.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from purgatory_client import AsyncPurgatoryClient
from purgatory_server import MockTime
from purgatory_server._service.schedules.timing import next_cron_fire

from tests.service.helpers import TEST_CONFIG

START = 1_700_000_000_000  # MockTime's wall clock at start: Tue 2023-11-14 22:13:20Z
HOUR = 3_600_000
MIDNIGHT = 1_700_006_400_000  # Wed 2023-11-15 00:00Z

CLASSIC = {
    "@hourly": 1_700_002_800_000,  # 23:00Z
    "@daily": MIDNIGHT,
    "@midnight": MIDNIGHT,
    "@weekly": 1_700_352_000_000,  # Sun 2023-11-19 00:00Z
    "@monthly": 1_701_388_800_000,  # 2023-12-01 00:00Z
    "@yearly": 1_704_067_200_000,  # 2024-01-01 00:00Z
    "@annually": 1_704_067_200_000,
}


@pytest.mark.parametrize(("alias", "first"), sorted(CLASSIC.items()))
def test_alias_is_its_classic_expression(alias: str, first: int) -> None:
    assert next_cron_fire(alias, "", START, "some-schedule") == first
    assert next_cron_fire(alias.upper(), "", START, "another") == first  # id-independent


def test_aliases_read_in_the_schedule_time_zone() -> None:
    # Midnight in New York (EST, UTC-5) is 05:00Z.
    assert next_cron_fire("@daily", "America/New_York", START, "ny") == MIDNIGHT + 5 * HOUR


def test_hashing_only_where_asked() -> None:
    hashed = {next_cron_fire("H H * * *", "", START, f"job-{i}") for i in range(8)}
    assert len(hashed) > 1  # spread by schedule id
    assert all(f % 60_000 == 0 for f in hashed)  # whole minutes, as the fields say


async def test_aliases_fire_at_their_classic_times_across_a_day(serve: Any) -> None:
    clock = MockTime()
    server, port = await serve(TEST_CONFIG, time=clock, reaper_enabled=False)
    purgatory = server.registry.get("default")
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        for alias in ("@hourly", "@daily", "@weekly"):
            up = await client.upsert_schedule(alias.strip("@"), cron=alias)
            assert up.schedule.next_fire_time_ms == CLASSIC[alias], alias
        for _ in range(25):  # one day and an hour, an hour at a time
            clock.sleep(HOUR)
            purgatory.advance_clock(0)

        async def fired() -> list[str]:
            out: list[str] = []
            async for event in client.subscribe(after_sequence=0):
                out.append(event.operation_id)
                if len(out) == 26:  # 25 hourly, 1 daily
                    break
            return out

        ids = await asyncio.wait_for(fired(), 10)
        hourly = sorted(i for i in ids if i.startswith("hourly@"))
        assert hourly == [f"hourly@{CLASSIC['@hourly'] + h * HOUR}" for h in range(25)]
        assert [i for i in ids if i.startswith("daily@")] == [f"daily@{MIDNIGHT}"]
        assert not [i for i in ids if i.startswith("weekly@")]
        (daily,) = [s for s in await client.list_schedules() if s.schedule_id == "daily"]
        assert daily.next_fire_time_ms == MIDNIGHT + 24 * HOUR
