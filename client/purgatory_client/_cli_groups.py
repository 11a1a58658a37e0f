"""The CLI's worker-group commands: ``purgatory ack``, ``purgatory group
list|dead-letters|redrive|delete`` and ``purgatory subscribe --group``.

Kept apart from :mod:`.cli` so the main parser only gains one hook per place.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from purgatory_client._base import ResumePolicy
from purgatory_client._sync import PurgatoryClient

__all__ = [
    "GROUP_COMMANDS",
    "add_group_parsers",
    "add_group_subscribe_args",
    "run_group",
    "run_group_subscribe",
]

GROUP_COMMANDS = frozenset({"ack", "group"})


def add_group_parsers(sub: Any) -> None:
    ack = sub.add_parser(
        "ack",
        help="ack a worker group's delivery (or discard a dead letter)",
        epilog="example: purgatory ack billing 42 --attempt 2",
    )
    ack.add_argument("group", help="the worker group")
    ack.add_argument("sequence", type=int, help="the outcome's sequence")
    ack.add_argument(
        "--attempt",
        type=int,
        default=0,
        help="the delivery_attempt being acked (refused if delivered again since); "
        "default: whichever delivery holds it",
    )

    group = sub.add_parser(
        "group",
        help="list worker groups, list or redrive dead letters, delete a group",
        epilog="examples: purgatory group list; purgatory group dead-letters billing; "
        "purgatory group redrive billing 42 43",
    )
    group.add_argument(
        "action",
        choices=["list", "dead-letters", "redrive", "delete"],
        help="list groups; list a group's dead letters; redrive them; delete a group",
    )
    group.add_argument("group", nargs="?", help="the worker group (all but list)")
    group.add_argument(
        "sequences",
        nargs="*",
        type=int,
        metavar="SEQ",
        help="redrive: these dead letters (default: all)",
    )
    group.add_argument("--after", type=int, default=0, help="dead-letters: after this sequence")
    group.add_argument(
        "--page-size", type=int, default=0, help="dead-letters: at most N (default 100)"
    )


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
        "--visibility-timeout-ms", type=int, default=0, help="with --group: lease length"
    )
    subscribe.add_argument(
        "--max-attempts", type=int, default=0, help="with --group: deliveries before dead letter"
    )
    subscribe.add_argument(
        "--prefetch", type=int, default=0, help="with --group: leases held at once (16)"
    )


def _delivery(value: Any) -> dict[str, Any]:
    """A Delivery's public fields (not the client it is bound to)."""
    return {
        f.name: getattr(value, f.name)
        for f in dataclasses.fields(value)
        if not f.name.startswith("_")
    }


def run_group_subscribe(
    args: argparse.Namespace, client: PurgatoryClient, emit: Callable[[Any], None]
) -> int:
    stream = client.join_group(
        args.group,
        visibility_timeout_ms=args.visibility_timeout_ms,
        max_attempts=args.max_attempts,
        prefetch=args.prefetch,
        resume=ResumePolicy(
            attempts=None if args.forever else args.resume_attempts,
            max_delay_s=args.resume_max_delay,
        ),
    )
    with stream:
        for n, delivery in enumerate(stream, 1):
            emit(_delivery(delivery))
            if args.ack:
                delivery.ack()
            if args.limit is not None and n >= args.limit:
                break
    return 0


def run_group(
    args: argparse.Namespace, client: PurgatoryClient, emit: Callable[[Any], None]
) -> int:
    if args.command == "ack":
        client.ack(args.group, args.sequence, attempt=args.attempt)
        emit({"acked": args.sequence})
        return 0
    if args.action == "list":
        for info in client.list_groups():
            emit(info)
        return 0
    if args.group is None:
        sys.stderr.write(f"purgatory: group {args.action} needs a GROUP\n")
        return 2
    if args.action == "dead-letters":
        page = client.list_dead_letters(
            args.group, after_sequence=args.after, page_size=args.page_size
        )
        for dead in page.dead_letters:
            emit(_delivery(dead))
        if page.next_after_sequence:
            emit({"next_after_sequence": page.next_after_sequence})
    elif args.action == "redrive":
        emit({"redriven": client.redrive(args.group, args.sequences or None)})
    else:
        emit({"dropped": client.delete_group(args.group)})
    return 0
