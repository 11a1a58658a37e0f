"""Fire-time computation: fixed intervals on the epoch grid, cron in a zone across DST.

Pure functions, no clock: each case names the instants it expects.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from purgatory_server._service.schedules.timing import (
    CronError,
    next_cron_fire,
    next_every_fire,
    parse_cron,
    zone,
)

NY = "America/New_York"
PARIS = "Europe/Paris"


def ms(*args: int, tz: str = NY, fold: int = 0) -> int:
    return int(datetime(*args, tzinfo=ZoneInfo(tz), fold=fold).timestamp() * 1000)


def fires(expression: str, tz: str, after_ms: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        after_ms = next_cron_fire(expression, tz, after_ms, "sched")
        out.append(after_ms)
    return out


def test_every_ms_fires_on_the_epoch_grid_strictly_after() -> None:
    assert next_every_fire(1_000, 1_700_000_000_000) == 1_700_000_001_000
    assert next_every_fire(1_000, 1_700_000_000_001) == 1_700_000_001_000
    assert next_every_fire(60_000, 59_999) == 60_000
    assert next_every_fire(60_000, 60_000) == 120_000


def test_daily_cron_follows_local_time_across_a_dst_change() -> None:
    # 09:00 in New York is 14:00Z in winter and 13:00Z in summer.
    got = fires("0 9 * * *", NY, ms(2026, 3, 7, 12, 0), 2)
    assert got == [ms(2026, 3, 8, 9, 0), ms(2026, 3, 9, 9, 0)]
    assert got[1] - got[0] == 24 * 3600 * 1000
    assert got[0] == int(datetime(2026, 3, 8, 13, 0, tzinfo=UTC).timestamp() * 1000)


def test_spring_forward_skips_a_local_time_that_does_not_exist() -> None:
    # 2026-03-08: New York clocks jump from 02:00 to 03:00; 02:30 does not exist that day.
    got = fires("30 2 * * *", NY, ms(2026, 3, 7, 12, 0), 2)
    assert got == [ms(2026, 3, 9, 2, 30), ms(2026, 3, 10, 2, 30)]
    # Europe/Paris (2026-03-29, 02:00 -> 03:00): the same rule in another zone.
    got = fires("15 2 * * *", PARIS, ms(2026, 3, 28, 12, 0, tz=PARIS), 1)
    assert got == [ms(2026, 3, 30, 2, 15, tz=PARIS)]


def test_fall_back_fires_a_repeated_local_time_once() -> None:
    # 2026-11-01: New York clocks go from 02:00 EDT back to 01:00 EST; 01:30 happens twice.
    got = fires("30 1 * * *", NY, ms(2026, 10, 31, 12, 0), 2)
    assert got == [ms(2026, 11, 1, 1, 30, fold=0), ms(2026, 11, 2, 1, 30)]
    # From inside the second pass of the repeated hour, the next fire is the next day.
    second_pass = ms(2026, 11, 1, 1, 10, fold=1)
    assert next_cron_fire("30 1 * * *", NY, second_pass, "s") == ms(2026, 11, 2, 1, 30)
    # An hourly job: each local hour once; the repeated 01:00 hour does not fire twice.
    got = fires("0 * * * *", NY, ms(2026, 11, 1, 0, 30), 3)
    assert got == [ms(2026, 11, 1, 1, 0, fold=0), ms(2026, 11, 1, 2, 0), ms(2026, 11, 1, 3, 0)]
    assert got[1] - got[0] == 2 * 3600 * 1000
    # Europe/Paris (2026-10-25, 03:00 CEST -> 02:00 CET): 02:30 fires once, in CEST.
    got = fires("30 2 * * *", PARIS, ms(2026, 10, 24, 12, 0, tz=PARIS), 2)
    assert got == [ms(2026, 10, 25, 2, 30, tz=PARIS, fold=0), ms(2026, 10, 26, 2, 30, tz=PARIS)]
    assert got[0] == int(datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp() * 1000)


def test_utc_is_the_default_zone_and_has_no_dst() -> None:
    start = ms(2026, 3, 28, 0, 0, tz="UTC")
    got = fires("30 2 * * *", "", start, 2)
    assert got[1] - got[0] == 24 * 3600 * 1000


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("", "must not be empty"),
        ("0 9 * *", "has 4 fields"),
        ("0 0 9 * * *", "has 6 fields"),
        ("R 9 * * *", "random"),
        ("61 9 * * *", "61"),
        ("@nope", "@nope"),
    ],
)
def test_bad_cron_expressions_are_refused(expression: str, problem: str) -> None:
    with pytest.raises(CronError, match=problem):
        parse_cron(expression, "s")


def test_a_cron_that_matches_no_date_and_an_unknown_zone_are_errors() -> None:
    with pytest.raises(CronError, match="no date"):
        next_cron_fire("0 0 30 2 *", "", 0, "s")
    for name in ("Mars/Olympus_Mons", "Europe", "../etc/passwd", "\x00"):
        with pytest.raises(CronError, match="unknown time zone"):
            zone(name)
    with pytest.raises(CronError, match="longer than"):
        zone("x" * 300)


def test_hashed_fields_are_stable_per_schedule_id() -> None:
    a = next_cron_fire("H * * * *", "", 0, "report")
    assert a == next_cron_fire("H * * * *", "", 0, "report")
    assert 0 < a <= 3_600_000
