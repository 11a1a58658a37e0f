"""The CLI's delayed-message commands: ``purgatory cancel`` and ``purgatory reschedule``.

Kept apart from :mod:`.cli` so the main parser only gains one hook per place.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from purgatory_client._sync import PurgatoryClient

__all__ = ["DELAYED_COMMANDS", "add_delayed_parsers", "run_delayed"]

DELAYED_COMMANDS = frozenset({"cancel", "reschedule"})


def add_delayed_parsers(sub: Any) -> None:
    cancel = sub.add_parser(
        "cancel",
        help="end pending operations as CANCELLED (by ids, --key or --prefix)",
        epilog="examples: purgatory cancel order-42 order-43; purgatory cancel --prefix order-",
    )
    cancel.add_argument(
        "operation_ids", nargs="*", metavar="OPERATION_ID", help="operations to cancel"
    )
    cancel.add_argument("--key", help="every pending operation watching KEY")
    cancel.add_argument("--prefix", help="every pending operation whose id starts with PREFIX")

    reschedule = sub.add_parser(
        "reschedule",
        help="move a pending operation's deadline",
        epilog="example: purgatory reschedule order-42 --timeout-ms 900000",
    )
    reschedule.add_argument("operation_id", help="the pending operation")
    when = reschedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--timeout-ms", type=int, help="new deadline, from now")
    when.add_argument(
        "--due-time-ms", type=int, help="new deadline, Unix epoch ms on the server's clock"
    )


def run_delayed(
    args: argparse.Namespace, client: PurgatoryClient, emit: Callable[[Any], None]
) -> int:
    if args.command == "cancel":
        given = sum((bool(args.operation_ids), args.key is not None, args.prefix is not None))
        if given != 1:
            sys.stderr.write("purgatory: cancel needs OPERATION_IDs, --key or --prefix (one)\n")
            return 2
        ended = client.cancel(args.operation_ids or None, key=args.key, prefix=args.prefix)
        emit({"cancelled": ended})
        return 0
    emit(
        client.reschedule(
            args.operation_id, timeout_ms=args.timeout_ms, due_time_ms=args.due_time_ms
        )
    )
    return 0
