"""The CLI's ``purgatory subscribe``: outcomes as JSON lines, resumed after a dropped
stream; with ``--group``, a worker group's member (``_cli_groups``)."""

from __future__ import annotations

import argparse
from typing import Any

from purgatory_client._cli_common import Context, count
from purgatory_client._cli_groups import add_group_subscribe_args, run_group_subscribe
from purgatory_client._models import OperationState
from purgatory_client._resume import ResumePolicy

__all__ = ["register"]


def register(sub: Any) -> None:
    subscribe = sub.add_parser(
        "subscribe",
        help="stream outcomes as JSON lines (from now on; --after 0 replays retained ones)",
        description="Stream outcomes as JSON lines. Without --after it prints only outcomes "
        "that happen from now on (nothing until an operation ends); --after 0 first replays "
        "every outcome the server still retains, --after SEQ those after SEQ. A dropped "
        "stream resumes where it stopped (see --resume-attempts, --forever).",
        epilog="example: purgatory subscribe --after 0 --state expired --limit 10",
    )
    subscribe.add_argument(
        "--after",
        type=count(0),
        metavar="SEQ",
        help="replay retained events after SEQ first (0: all retained)",
    )
    subscribe.add_argument(
        "--state",
        action="append",
        default=[],
        choices=[s.name.lower() for s in OperationState if s.is_final],
        help="only outcomes in this state (repeatable)",
    )
    subscribe.add_argument(
        "--key", action="append", default=[], help="only operations watching KEY (repeatable)"
    )
    subscribe.add_argument("--prefix", default="", help="operation id prefix")
    subscribe.add_argument("--limit", type=count(1), metavar="N", help="stop after N events")
    subscribe.add_argument(
        "--resume-attempts",
        type=count(0),
        default=8,
        metavar="N",
        help="resumes in a row without an event before giving up (default 8: about 8 s)",
    )
    subscribe.add_argument(
        "--resume-max-delay",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="cap of the doubling delay between resumes (default 2.0)",
    )
    subscribe.add_argument(
        "--forever", action="store_true", help="resume however long the server is away"
    )
    add_group_subscribe_args(subscribe)
    subscribe.set_defaults(handler=_subscribe)


def _resume_policy(args: argparse.Namespace) -> ResumePolicy:
    """``--resume-attempts``, ``--resume-max-delay`` and ``--forever``."""
    return ResumePolicy(
        attempts=None if args.forever else args.resume_attempts,
        max_delay_s=args.resume_max_delay,
    )


def _subscribe(args: argparse.Namespace, ctx: Context) -> int:
    if args.group:
        return run_group_subscribe(args, ctx, _resume_policy(args))
    events = ctx.client.subscribe(
        after_sequence=args.after,
        states=[OperationState[s.upper()] for s in args.state],
        keys=args.key,
        operation_id_prefix=args.prefix,
        resume=_resume_policy(args),
    )
    for n, event in enumerate(events, 1):
        ctx.emit(event)
        if args.limit is not None and n >= args.limit:
            break
    return 0
