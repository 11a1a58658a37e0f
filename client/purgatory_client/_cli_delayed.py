"""The CLI's delayed-message commands: ``purgatory cancel``, ``reschedule`` and ``ls``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from purgatory_client._cli_common import Context, count, timeout_ms_arg
from purgatory_client._cli_output import without
from purgatory_client._models import OperationState

__all__ = ["register"]


def register(sub: Any) -> None:
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
    cancel.set_defaults(handler=_cancel)

    reschedule = sub.add_parser(
        "reschedule",
        help="move a pending operation's deadline",
        epilog="example: purgatory reschedule order-42 --timeout-ms 900000",
    )
    reschedule.add_argument("operation_id", help="the pending operation")
    when = reschedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--timeout-ms", type=timeout_ms_arg(), help="new deadline, from now")
    when.add_argument(
        "--due-time-ms", type=count(1), help="new deadline, Unix epoch ms on the server's clock"
    )
    reschedule.set_defaults(handler=_reschedule)
    _add_ls_parser(sub)


def _add_ls_parser(sub: Any) -> None:
    ls = sub.add_parser(
        "ls",
        help="list pending (or recently ended) operations with their progress, by id",
        epilog="examples: purgatory ls --prefix order-; purgatory ls --key cart:1 --limit 20; "
        "purgatory ls --state cancelled --state expired; "
        "purgatory ls --page-size 50 (one page, then its next_page_token)",
    )
    ls.add_argument("--key", default="", help="only operations watching KEY")
    ls.add_argument("--prefix", default="", help="only operations whose id starts with PREFIX")
    ls.add_argument(
        "--state",
        action="append",
        default=[],
        choices=[s.name.lower() for s in OperationState if s is not OperationState.UNSPECIFIED],
        help="only operations in this state (repeatable; default: watching, i.e. pending)",
    )
    ls.add_argument(
        "--due-after-ms",
        type=count(0),
        default=0,
        metavar="MS",
        help="due at or after MS (epoch ms)",
    )
    ls.add_argument(
        "--due-before-ms", type=count(0), default=0, metavar="MS", help="due before MS (epoch ms)"
    )
    ls.add_argument("--limit", type=count(1), metavar="N", help="stop after N operations")
    ls.add_argument(
        "--page-size", type=count(0), default=0, metavar="N", help="one page of N (max 1000)"
    )
    ls.add_argument(
        "--page-token", default="", help="one page, from a previous page's next_page_token"
    )
    ls.set_defaults(handler=_ls)


def _ls(args: argparse.Namespace, ctx: Context) -> int:
    """Every page (``--limit`` stops early), or one page (``--page-size``/``--page-token``)
    followed by ``{"next_page_token": ...}`` to pass back."""
    filters: dict[str, Any] = {
        "key": args.key,
        "prefix": args.prefix,
        "states": [OperationState[s.upper()] for s in args.state],
        "due_after_ms": args.due_after_ms,
        "due_before_ms": args.due_before_ms,
    }
    if args.page_size or args.page_token:
        page = ctx.client.list_operations(
            page_token=args.page_token, page_size=args.page_size, **filters
        )
        ctx.emit_all(without(status, "created") for status in page.operations)
        ctx.emit({"next_page_token": page.next_page_token})
        return 0
    for n, status in enumerate(ctx.client.iter_operations(**filters), 1):
        ctx.emit(without(status, "created"))
        if args.limit is not None and n >= args.limit:
            break
    return 0


def _cancel(args: argparse.Namespace, ctx: Context) -> int:
    given = sum((bool(args.operation_ids), args.key is not None, args.prefix is not None))
    if given != 1:
        sys.stderr.write("purgatory: cancel needs OPERATION_IDs, --key or --prefix (one)\n")
        return 2
    ended = ctx.client.cancel(args.operation_ids or None, key=args.key, prefix=args.prefix)
    ctx.emit({"cancelled": ended})
    return 0


def _reschedule(args: argparse.Namespace, ctx: Context) -> int:
    ctx.emit(
        ctx.client.reschedule(
            args.operation_id, timeout_ms=args.timeout_ms, due_time_ms=args.due_time_ms
        )
    )
    return 0
