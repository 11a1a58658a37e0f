"""When a schedule fires: fixed intervals and cron expressions in a time zone.

Pure functions of (definition, instant) -> next instant, in Unix epoch milliseconds, so
every producer and every restart computes the very same fire times (occurrence ids are
built from them) and the rules can be tested without a clock.

Fixed interval (``every_ms``): the fire times are the multiples of ``every_ms`` since the
Unix epoch (not the upsert time), so producers upserting at different moments agree.

Cron (five fields, read in an IANA time zone): croniter enumerates the matching *local*
wall-clock times, naive, and each is then placed on the time line with ``zoneinfo``:

- a local time that does not exist (the hour skipped when clocks spring forward) is
  skipped: a daily 02:30 job does not run on that day;
- a local time that exists twice (the hour repeated when clocks fall back) fires once,
  at its first occurrence (``fold=0``, the offset in force before the change).

This is the behaviour of Vixie cron for fixed-time jobs; a job that wants a strict
interval across the change should use ``every_ms`` instead.

Aliases (``@hourly``, ``@daily``/``@midnight``, ``@weekly``, ``@monthly``,
``@yearly``/``@annually``) mean their classic expressions (``@daily`` is ``0 0 * * *``),
expanded before croniter, which would hash them on ``hash_id``. Only ``H`` fields hash.

Thread-safety: stateless; croniter objects are built per call.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

__all__ = [
    "MIN_EVERY_MS",
    "CronError",
    "next_cron_fire",
    "next_every_fire",
    "parse_cron",
    "zone",
]

# The smallest interval: each firing is an operation, an outcome and (durable) three
# journal records, so a schedule cannot be used to flood a purgatory.
MIN_EVERY_MS = 100
# Naive candidates looked at per call before giving up. A repeated hour skips at most 60
# per-minute candidates; an expression matching nothing is stopped by croniter itself.
_MAX_CANDIDATES = 1_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# IANA names are short ("America/Argentina/ComodRivadavia" is among the longest).
_MAX_ZONE_NAME = 64
# The classic meanings of the aliases (Vixie cron's crontab(5)).
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class CronError(ValueError):
    """A cron expression or time zone that cannot be used (the message says why)."""


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` ("" is UTC); CronError if unknown."""
    if not name:
        return ZoneInfo("UTC")
    if len(name) > _MAX_ZONE_NAME:
        raise CronError(f"time zone name longer than {_MAX_ZONE_NAME} characters")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # OSError: a name that maps onto the zone directory itself ("Europe"), or onto a
        # path the file system refuses.
        raise CronError(f"unknown time zone {name[:100]!r}") from exc


def parse_cron(expression: str, hash_id: str) -> None:
    """Check ``expression`` is a usable five-field cron expression; CronError if not.

    Refused: six or seven fields (seconds/years: finer than the minimum interval, and
    not portable), and croniter's random ``R`` fields (two producers would draw
    different times). ``H`` (hashed) fields are allowed: they are hashed on ``hash_id``
    (the schedule id), so every producer gets the same minute.
    """
    fields = expression.split()
    if not fields:
        raise CronError("must not be empty")
    if fields[0].startswith("@"):
        if len(fields) != 1:
            raise CronError(f"{expression[:100]!r}: an @alias stands alone")
        if fields[0].lower() not in _ALIASES:
            raise CronError(
                f"{expression[:100]!r}: unknown alias; use one of " + ", ".join(_ALIASES)
            )
        return
    if len(fields) != 5:
        raise CronError(
            f"{expression[:100]!r} has {len(fields)} fields; use five "
            "(minute hour day-of-month month day-of-week)"
        )
    if any(f.upper().startswith("R") for f in fields):
        raise CronError(f"{expression[:100]!r}: random (R) fields are not allowed")
    try:
        croniter(expression, datetime(2000, 1, 1), hash_id=hash_id.encode())
    except (CroniterBadCronError, CroniterError, ValueError, KeyError) as exc:
        raise CronError(f"{expression[:100]!r}: {str(exc)[:100]}") from exc


def _classic(expression: str) -> str:
    """``expression`` with an alias replaced by its classic expression (module docstring)."""
    stripped = expression.strip()
    if stripped.startswith("@"):
        return _ALIASES.get(stripped.lower(), stripped)
    return expression


def next_every_fire(every_ms: int, after_ms: int) -> int:
    """The first multiple of ``every_ms`` strictly after ``after_ms``."""
    return (after_ms // every_ms + 1) * every_ms


def _instant_ms(local: datetime, tz: ZoneInfo) -> int | None:
    """Epoch ms of the naive local time ``local`` in ``tz``; None if it does not exist.

    ``fold=0`` picks the first of two instants of a repeated local time. A time in a
    spring-forward gap does not survive the round trip to UTC and back.
    """
    aware = local.replace(tzinfo=tz, fold=0)
    utc = aware.astimezone(UTC)
    if utc.astimezone(tz).replace(tzinfo=None) != local:
        return None
    return (utc - _EPOCH) // timedelta(milliseconds=1)


def next_cron_fire(expression: str, time_zone: str, after_ms: int, hash_id: str) -> int:
    """The first instant strictly after ``after_ms`` whose local time in ``time_zone``
    matches ``expression`` (the rules in the module docstring); CronError if none."""
    tz = zone(time_zone)
    after = datetime.fromtimestamp(after_ms / 1000, UTC).astimezone(tz)
    # Start one hour early in local naive time: when ``after`` lies in the second pass of
    # a repeated hour, matches in the first pass are before it and are filtered below.
    start = after.replace(tzinfo=None, fold=0) - timedelta(hours=1)
    try:
        it = croniter(_classic(expression), start, hash_id=hash_id.encode())
        for _ in range(_MAX_CANDIDATES):
            local = it.get_next(datetime)
            fire = _instant_ms(local, tz)
            if fire is not None and fire > after_ms:
                return fire
    except CroniterBadDateError as exc:
        raise CronError(f"{expression[:100]!r} matches no date") from exc
    except (CroniterError, ValueError, OverflowError) as exc:
        raise CronError(f"{expression[:100]!r}: {str(exc)[:100]}") from exc
    raise CronError(f"{expression[:100]!r}: no fire time found")
