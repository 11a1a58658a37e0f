"""The CLI's operation commands: ``purgatory watch``, ``signal``, ``get`` and ``force``."""

from __future__ import annotations

import argparse
import secrets
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from purgatory_client._cli_common import (
    CONDITION_HELP,
    Context,
    count,
    global_options,
    json_object,
    parse_condition,
    timeout_ms_arg,
)
from purgatory_client._cli_output import without
from purgatory_client._models import Condition, Signal

__all__ = ["register"]


def register(sub: Any) -> None:
    _add_watch_parser(sub)
    signal = sub.add_parser(
        "signal",
        help="signal a key",
        epilog="example: purgatory signal acks --source broker-1 --amount 1",
    )
    signal.add_argument("key", help="the key whose watchers are checked")
    signal.add_argument("--amount", type=int, default=0, help="added to sum:N conditions (e.g. 3)")
    signal.add_argument("--value", type=int, help="the key's latest value, for values:N (e.g. 42)")
    signal.add_argument("--source", default="", help="who signals, counted once by min-distinct:N")
    signal.add_argument("--data", default="", help="UTF-8 text appended to the outcome's data")
    signal.add_argument(
        "--attributes",
        type=json_object,
        metavar="JSON",
        help="a JSON object that watchers' --if and --match read as signal.attributes "
        """(e.g. '{"invoice_id": 42, "approved": true}')""",
    )
    signal.set_defaults(handler=_signal)

    get = sub.add_parser(
        "get",
        help="print one operation's state (and, while WATCHING, its progress so far)",
        epilog="example: purgatory get order-17",
    )
    get.add_argument("operation_id", metavar="OPERATION_ID", help="the operation's id")
    get.set_defaults(handler=_get)

    force = sub.add_parser(
        "force", help="force-complete an operation", epilog="example: purgatory force order-17"
    )
    force.add_argument("operation_id", metavar="OPERATION_ID", help="the operation's id")
    force.set_defaults(handler=_force)


def _add_watch_parser(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="register an operation and wait for its outcome",
        epilog="example: purgatory watch acks --timeout-ms 30000 --condition min-distinct:2 "
        "--id produce-17 (Ctrl-C stops waiting, not the operation)",
    )
    watch.add_argument("keys", nargs="*", metavar="KEY", help="keys to watch (none: a pure timer)")
    watch.add_argument(
        "--timeout-ms",
        type=timeout_ms_arg(),
        required=True,
        help="expire the operation after this many ms (e.g. 30000)",
    )
    watch.add_argument(
        "--condition", type=parse_condition, default=Condition.any_key(), help=CONDITION_HELP
    )
    watch.add_argument(
        "--if",
        dest="filter",
        default="",
        metavar="EXPR",
        help="a CEL filter: only signals for which it is true count toward --condition "
        "(e.g. --if \"signal.attributes.role == 'finance'\"; docs/conditions.md)",
    )
    watch.add_argument(
        "--match",
        default="",
        metavar="PATH",
        help="only signals whose attribute PATH equals this operation's count (needs "
        "--attributes with PATH; e.g. --match invoice_id)",
    )
    watch.add_argument(
        "--predicate",
        default="",
        metavar="EXPR",
        help="a CEL predicate over the result, judged once --condition holds (e.g. "
        "'result.amount_sum >= 100')",
    )
    watch.add_argument(
        "--attributes",
        type=json_object,
        metavar="JSON",
        help="this operation's attributes, read as op.attributes (e.g. '{\"invoice_id\": 42}')",
    )
    watch.add_argument(
        "--id", default="", help="operation id (default: cli- and 20 random hex digits)"
    )
    watch.add_argument(
        "--payload", default="", help="UTF-8 text echoed in the outcome (e.g. order-17)"
    )
    watch.add_argument("--no-wait", action="store_true", help="return once registered")
    watch.add_argument(
        "--extend-on-resend",
        action="store_true",
        help="debounce: re-sending this --id while pending pushes its deadline to now + "
        "--timeout-ms (e.g. watch --id flush-1 --timeout-ms 5000 --extend-on-resend)",
    )
    watch.add_argument(
        "--max-extend-ms",
        type=count(0),
        default=0,
        metavar="MS",
        help="with --extend-on-resend: never past creation + MS (0: no cap)",
    )
    watch.set_defaults(handler=_watch)


def _watch(args: argparse.Namespace, ctx: Context) -> int:
    """Register and wait; Ctrl-C while waiting says how to wait on it again.

    Without ``--id`` the CLI names the operation itself (``cli-`` and 20 random hex
    digits) before it sends anything, so a Ctrl-C at any moment, even before the server
    answered, can name the operation to wait on again or to look at.
    """

    condition: Condition = args.condition
    if args.filter or args.match or args.predicate or args.attributes is not None:
        condition = condition.where(
            args.filter, predicate=args.predicate, match=args.match, attributes=args.attributes
        )
    operation_id = args.id or f"cli-{secrets.token_hex(10)}"

    def send(wait: bool) -> Any:
        return ctx.client.try_complete_else_watch(
            args.keys,
            args.timeout_ms,
            condition=condition,
            payload=args.payload.encode(),
            operation_id=operation_id,
            wait=wait,
            extend_on_resend=args.extend_on_resend,
            max_extend_ms=args.max_extend_ms,
        )

    if args.no_wait:
        ctx.emit(send(False))
        return 0
    # The call runs on its own thread and this one only waits: a Ctrl-C (raised in the
    # main thread wherever it is) then never lands inside gRPC's own code, where it can
    # leave a lock held and the process hanging on its way out. Closing the channel
    # (leaving ``main``'s client) cancels the call, which ends the thread.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="purgatory-watch")
    try:
        waiting = pool.submit(send, True)
        pool.shutdown(wait=False)
        answer = waiting.result()
    except KeyboardInterrupt:
        again = list(ctx.argv) if args.id else [*ctx.argv, "--id", operation_id]
        get = [*global_options(ctx.argv), "get", operation_id]
        sys.stderr.write(
            f"purgatory: stopped waiting; operation {operation_id!r} stays pending on the "
            f"server (if it got there). Wait on it again with:\n  purgatory "
            f"{shlex.join(again)}\nor see its state with: purgatory {shlex.join(get)}\n"
        )
        raise
    ctx.emit(answer)
    return 0


def _signal(args: argparse.Namespace, ctx: Context) -> int:
    sig = Signal(args.amount, args.value, args.source, args.data.encode(), args.attributes)
    ctx.emit({"completed": ctx.client.check_and_complete(args.key, sig)})
    return 0


def _get(args: argparse.Namespace, ctx: Context) -> int:
    # ``created`` says whether a registration made the operation: meaningless here.
    ctx.emit(without(ctx.client.get_operation(args.operation_id), "created"))
    return 0


def _force(args: argparse.Namespace, ctx: Context) -> int:
    ctx.emit(ctx.client.force_complete(args.operation_id))
    return 0
