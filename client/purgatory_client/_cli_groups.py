"""The CLI's worker-group commands: ``purgatory ack`` (one, or a batch), ``purgatory
nack``, ``purgatory group list|dead-letters|redrive|discard|delete``, and the ``--group``
side of ``purgatory subscribe`` (its options and its loop, for ``_cli_subscribe``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from purgatory_client._bounds import (
    MAX_ATTEMPTS,
    MAX_PREFETCH,
    MAX_RETRY_DELAY_MS,
    MAX_VISIBILITY_TIMEOUT_MS,
    MIN_VISIBILITY_TIMEOUT_MS,
)
from purgatory_client._cli_common import Context, count, default_or
from purgatory_client._groups_base import (
    AckEntry,
    FirstKey,
    GroupPriority,
    GroupRateLimit,
    GroupSelection,
    IdPrefix,
    KeySource,
    RetryBackoff,
)
from purgatory_client._resume import ResumePolicy

__all__ = ["add_group_subscribe_args", "register", "run_group_subscribe"]


def register(sub: Any) -> None:
    ack = sub.add_parser(
        "ack",
        help="ack a worker group's deliveries (or discard dead letters): one, or a batch",
        epilog="examples: purgatory ack billing 42 --attempt 2; purgatory ack billing 42:2 43:1 "
        "(one call; each answered on its own)",
    )
    ack.add_argument("group", help="the worker group")
    ack.add_argument(
        "sequences",
        nargs="+",
        type=_entry,
        metavar="SEQ[:ATTEMPT]",
        help="the outcomes' sequences, each with the delivery_attempt being acked",
    )
    ack.add_argument(
        "--attempt",
        type=count(0),
        default=0,
        help="with one SEQ: the delivery_attempt being acked (refused if delivered again "
        "since); default: whichever delivery holds it",
    )
    ack.set_defaults(handler=_ack)

    nack = sub.add_parser(
        "nack",
        help="end a worker group's delivery unacked: offered again later, or a dead letter",
        epilog="example: purgatory nack billing 42 --attempt 2 --delay-ms 5000",
    )
    nack.add_argument("group", help="the worker group")
    nack.add_argument("sequence", type=count(1), help="the outcome's sequence")
    nack.add_argument(
        "--attempt", type=count(0), default=0, help="the delivery_attempt being nacked"
    )
    nack.add_argument(
        "--delay-ms",
        type=count(0, MAX_RETRY_DELAY_MS),
        default=None,
        help="offer it again after this long (0: at once); default: the group's backoff",
    )
    nack.add_argument(
        "--dead-letter", action="store_true", help="make it a dead letter now (no retry)"
    )
    nack.set_defaults(handler=_nack)

    group = sub.add_parser(
        "group",
        help="list worker groups, list, redrive or discard dead letters, delete a group",
        epilog="examples: purgatory group list; purgatory group dead-letters billing; "
        "purgatory group redrive billing 42 43; purgatory group discard billing --all",
    )
    group.add_argument(
        "action",
        choices=["list", "dead-letters", "redrive", "discard", "delete"],
        help="list groups; list a group's dead letters; redrive them; discard them for "
        "good; delete a group",
    )
    group.add_argument("group", nargs="?", help="the worker group (all but list)")
    group.add_argument(
        "sequences",
        nargs="*",
        type=count(1),
        metavar="SEQ",
        help="redrive: these dead letters (default: all); discard: these (or --all)",
    )
    group.add_argument("--all", action="store_true", help="discard: every dead letter of the group")
    group.add_argument(
        "--after", type=count(0), default=0, help="dead-letters: after this sequence"
    )
    group.add_argument(
        "--page-size", type=count(0), default=0, help="dead-letters: at most N (default 100)"
    )
    group.set_defaults(handler=_group)


def add_group_subscribe_args(subscribe: argparse.ArgumentParser) -> None:
    subscribe.add_argument(
        "--group",
        help="join this worker group: each outcome goes to one member, leased (see docs)",
    )
    subscribe.add_argument(
        "--ack",
        action="store_true",
        help="with --group: ack each delivery once printed (otherwise: purgatory ack)",
    )
    subscribe.add_argument(
        "--visibility-timeout-ms",
        type=default_or(MIN_VISIBILITY_TIMEOUT_MS, MAX_VISIBILITY_TIMEOUT_MS),
        default=0,
        help="with --group: lease length",
    )
    subscribe.add_argument(
        "--max-attempts",
        type=default_or(1, MAX_ATTEMPTS),
        default=0,
        help="with --group: deliveries before dead letter",
    )
    subscribe.add_argument(
        "--prefetch",
        type=default_or(1, MAX_PREFETCH),
        default=0,
        help="with --group: leases held at once (16)",
    )
    # A new group's selection (docs/service.md "Priorities, ordering keys and rate
    # limits"); both --priority forms append to one list, so the rules keep their order.
    subscribe.add_argument(
        "--priority",
        dest="priorities",
        action="append",
        type=_rule("operation_id_prefix"),
        metavar="PREFIX=N",
        help="with --group, creating it: operation ids starting with PREFIX get priority N "
        "(higher first; the first matching rule wins; repeatable)",
    )
    subscribe.add_argument(
        "--priority-key",
        dest="priorities",
        action="append",
        type=_rule("key"),
        metavar="KEY=N",
        help="with --group, creating it: operations watching KEY get priority N",
    )
    subscribe.add_argument(
        "--ordering-key",
        type=_key_source,
        metavar="first-key|SEP",
        help="with --group, creating it: one outcome per key in flight, in order; the key "
        "is the first watched key, or the operation id up to separator SEP",
    )
    subscribe.add_argument(
        "--rate-limit",
        type=_rate,
        metavar="MAX/WINDOW_MS",
        help="with --group, creating it: at most MAX deliveries in any WINDOW_MS",
    )
    subscribe.add_argument(
        "--rate-limit-per-key",
        type=_key_source,
        metavar="first-key|SEP",
        help="with --rate-limit: the bound holds per key (as for --ordering-key)",
    )
    subscribe.add_argument(
        "--backoff",
        choices=["fixed", "exponential"],
        help="with --group, creating it: retry backoff before an unacked outcome's next offer",
    )
    subscribe.add_argument(
        "--backoff-delay-ms",
        type=count(1, MAX_RETRY_DELAY_MS),
        default=1000,
        help="with --backoff: the (first) wait (1000)",
    )
    subscribe.add_argument(
        "--backoff-max-delay-ms",
        type=count(0, MAX_RETRY_DELAY_MS),
        default=0,
        help="with --backoff: the longest wait (0: 12 h)",
    )
    subscribe.add_argument(
        "--backoff-jitter",
        type=_share,
        default=0.0,
        help="with --backoff: the random share of each wait, 0 to 1 (0)",
    )


def _rule(field: str) -> Any:
    def parse(text: str) -> GroupPriority:
        name, sep, number = text.rpartition("=")
        if not sep or not name or not number.isdigit():
            raise argparse.ArgumentTypeError(f"expected NAME=N, got {text!r}")
        return GroupPriority(int(number), **{field: name})

    return parse


def _key_source(text: str) -> KeySource:
    if not text:
        raise argparse.ArgumentTypeError("expected first-key or a separator")
    return FirstKey() if text == "first-key" else IdPrefix(text)


def _rate(text: str) -> tuple[int, int]:
    most, sep, window = text.partition("/")
    if not sep or not most.isdigit() or not window.isdigit():
        raise argparse.ArgumentTypeError(f"expected MAX/WINDOW_MS, got {text!r}")
    return int(most), int(window)


def _selection(args: argparse.Namespace) -> GroupSelection | None:
    """The selection the options give (None: none; the group's, if it exists)."""
    rate = None
    if args.rate_limit is not None:
        most, window = args.rate_limit
        rate = GroupRateLimit(most, window, args.rate_limit_per_key)
    priorities = tuple(args.priorities or ())
    if not priorities and args.ordering_key is None and rate is None:
        return None
    return GroupSelection(priorities, args.ordering_key, rate)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text[:100]!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _entry(text: str) -> AckEntry:
    """``SEQ`` or ``SEQ:ATTEMPT``."""
    seq, _, attempt = text.partition(":")
    return AckEntry(count(1)(seq), count(0)(attempt) if attempt else 0)


def _delivery(value: Any) -> dict[str, Any]:
    """A Delivery's public fields (not the client it is bound to)."""
    return {
        f.name: getattr(value, f.name)
        for f in dataclasses.fields(value)
        if not f.name.startswith("_")
    }


def run_group_subscribe(args: argparse.Namespace, ctx: Context, resume: ResumePolicy) -> int:
    if args.rate_limit_per_key is not None and args.rate_limit is None:
        sys.stderr.write("purgatory: subscribe --rate-limit-per-key needs --rate-limit\n")
        return 2
    stream = ctx.client.join_group(
        args.group,
        visibility_timeout_ms=args.visibility_timeout_ms,
        max_attempts=args.max_attempts,
        prefetch=args.prefetch,
        resume=resume,
        selection=_selection(args),
        backoff=None
        if args.backoff is None
        else RetryBackoff(
            args.backoff, args.backoff_delay_ms, args.backoff_max_delay_ms, args.backoff_jitter
        ),
    )
    with stream:
        for n, delivery in enumerate(stream, 1):
            ctx.emit(_delivery(delivery))
            if args.ack:
                delivery.ack()
            if args.limit is not None and n >= args.limit:
                break
    return 0


def _ack(args: argparse.Namespace, ctx: Context) -> int:
    """One SEQ: Ack (its error fails the command). Several: one AckBatch, a line per
    entry; exit 1 if any entry failed."""
    entries: list[AckEntry] = args.sequences
    if len(entries) == 1:
        (entry,) = entries
        ctx.client.ack(args.group, entry.sequence, attempt=entry.attempt or args.attempt)
        ctx.emit({"acked": entry.sequence})
        return 0
    if args.attempt:
        sys.stderr.write("purgatory: ack --attempt takes one SEQ (use SEQ:ATTEMPT)\n")
        return 2
    failed = 0
    for result in ctx.client.ack_batch(args.group, entries):
        if result.ok:
            ctx.emit({"acked": result.sequence})
        else:
            failed += 1
            ctx.emit({"sequence": result.sequence, "code": result.code, "error": result.message})
    return 1 if failed else 0


def _nack(args: argparse.Namespace, ctx: Context) -> int:
    result = ctx.client.nack(
        args.group,
        args.sequence,
        attempt=args.attempt,
        delay_ms=args.delay_ms,
        dead_letter=args.dead_letter,
    )
    ctx.emit(
        {
            "nacked": args.sequence,
            "dead_letter": result.dead_letter,
            "redeliver_at_ms": result.redeliver_at_ms,
        }
    )
    return 0


def _group(args: argparse.Namespace, ctx: Context) -> int:
    client, emit = ctx.client, ctx.emit
    if args.action == "list":
        ctx.emit_all(client.list_groups())
        return 0
    if args.group is None:
        sys.stderr.write(f"purgatory: group {args.action} needs a GROUP\n")
        return 2
    if args.action == "dead-letters":
        page = client.list_dead_letters(
            args.group, after_sequence=args.after, page_size=args.page_size
        )
        ctx.emit_all(_delivery(dead) for dead in page.dead_letters)
        if page.next_after_sequence:
            emit({"next_after_sequence": page.next_after_sequence})
    elif args.action == "redrive":
        emit({"redriven": client.redrive(args.group, args.sequences or None)})
    elif args.action == "discard":
        if bool(args.sequences) == args.all:
            sys.stderr.write("purgatory: group discard needs SEQ... or --all (not both)\n")
            return 2
        emit({"discarded": client.discard_dead_letters(args.group, args.sequences or None)})
    else:
        emit({"dropped": client.delete_group(args.group)})
    return 0
