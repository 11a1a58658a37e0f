"""The CLI's recurring schedules: ``purgatory schedule set|rm|ls``."""

from __future__ import annotations

import argparse
from typing import Any

from purgatory_client._bounds import MAX_TIMEOUT_MS, MIN_EVERY_MS
from purgatory_client._cli_common import Context, count, parse_condition

__all__ = ["register"]


def register(sub: Any) -> None:
    schedule = sub.add_parser(
        "schedule",
        help="create/replace (set), delete (rm) or list (ls) recurring schedules",
        description="A schedule fires every N ms (on the epoch grid) or at the times of a "
        "five-field cron expression in a time zone. Each firing is an operation "
        "'<ID>@<fire time ms>' due at its fire time (EXPIRED then, or COMPLETED earlier by "
        "a signal on its keys); see docs/service.md 'Recurring schedules'.",
        epilog="examples: purgatory schedule set nightly --cron '0 2 * * *' --tz Europe/Paris "
        "--payload compact; purgatory schedule set beat --every-ms 60000; "
        "purgatory schedule ls; purgatory schedule rm nightly",
    )
    actions = schedule.add_subparsers(dest="schedule_action", required=True)
    set_ = actions.add_parser("set", help="create or replace a schedule (idempotent)")
    set_.add_argument("schedule_id", metavar="ID", help="the schedule's id")
    when = set_.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--every-ms",
        type=count(MIN_EVERY_MS, MAX_TIMEOUT_MS),
        help=f"fire every N ms (at least {MIN_EVERY_MS})",
    )
    when.add_argument("--cron", help="five-field cron expression, e.g. '30 9 * * MON-FRI'")
    set_.add_argument("--tz", default="", help="IANA time zone of --cron (default: UTC)")
    set_.add_argument(
        "--key", action="append", default=[], help="a key each occurrence watches (repeatable)"
    )
    set_.add_argument(
        "--condition",
        type=parse_condition,
        default=None,
        help="completes an occurrence before its fire time (default any: first signal)",
    )
    set_.add_argument("--payload", default="", help="UTF-8 text echoed in every outcome")
    rm = actions.add_parser("rm", help="delete a schedule; its armed occurrence is cancelled")
    rm.add_argument("schedule_id", metavar="ID", help="the schedule's id")
    actions.add_parser("ls", help="list the schedules with their next occurrence (JSON lines)")
    schedule.set_defaults(handler=_schedule)


def _schedule(args: argparse.Namespace, ctx: Context) -> int:
    client, emit = ctx.client, ctx.emit
    action = args.schedule_action
    if action == "set":
        emit(
            client.upsert_schedule(
                args.schedule_id,
                every_ms=args.every_ms,
                cron=args.cron,
                time_zone=args.tz,
                keys=args.key,
                condition=args.condition,
                payload=args.payload.encode(),
            )
        )
    elif action == "rm":
        emit({"cancelled": client.delete_schedule(args.schedule_id)})
    else:
        ctx.emit_all(client.list_schedules())
    return 0
