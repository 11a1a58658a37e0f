"""What every ``purgatory`` subcommand shares: how it is registered and run, how results
are printed, and the ``--condition`` syntax.

A subcommand module has a ``register(sub)`` that adds its parser(s) to the subparsers
``sub`` and names its handler with ``set_defaults(handler=...)``; ``cli.main`` builds the
client and calls ``args.handler(args, Context(...))``. A handler returns the exit status
(0 success, 2 bad usage); the server's errors propagate as
:class:`~purgatory_client.PurgatoryError` (exit status 1, printed by ``cli.main``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from purgatory_client._bounds import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS
from purgatory_client._cli_output import Printer
from purgatory_client._models import Condition
from purgatory_client._sync import PurgatoryClient

__all__ = [
    "CONDITION_HELP",
    "Context",
    "Emit",
    "Handler",
    "count",
    "default_or",
    "global_options",
    "parse_condition",
    "timeout_ms_arg",
]

Emit = Callable[[Any], None]


@dataclasses.dataclass(frozen=True)
class Context:
    """One run of a subcommand: the client, where results go (``emit``: one line each,
    in the chosen ``--output``; ``_cli_output``) and the command line as typed (for hints
    that repeat it)."""

    client: PurgatoryClient
    emit: Emit
    argv: Sequence[str] = ()

    def emit_all(self, values: Iterable[Any]) -> None:
        """Emit a complete list of results (a table then fits every row, not the first)."""
        if isinstance(self.emit, Printer):
            self.emit.all(values)
        else:
            for value in values:
                self.emit(value)


Handler = Callable[[argparse.Namespace, Context], int]


def parse_condition(text: str) -> Condition:
    """``any``, ``all``, ``min:N``, ``min-distinct:N``, ``sum:N`` or ``values:N``."""
    name, _, arg = text.partition(":")
    try:
        if name == "any":
            return Condition.any_key()
        if name == "all":
            return Condition.all_keys()
        if name == "min":
            return Condition.min_signals(int(arg))
        if name == "min-distinct":
            return Condition.min_signals(int(arg), distinct_sources=True)
        if name == "sum":
            return Condition.sum_at_least(int(arg))
        if name == "values":
            return Condition.values_at_least(default_target=int(arg))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"bad condition {text!r}")


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object (attributes), e.g. '{"invoice_id": 42}'."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object: {text[:60]!r}")
    return value


CONDITION_HELP = (
    "when the operation completes: any (the first signal on any key, the default), all "
    "(every key signalled), min:N (N signals), min-distinct:N (N distinct --source values), "
    "sum:N (signals' --amount adds up to N), values:N (every key's latest --value >= N); "
    "e.g. --condition min-distinct:2"
)


def count(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum`` and, if given, <= ``maximum``
    (``--limit -1`` is a usage error, not an empty listing)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text[:100]!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def default_or(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: 0 (the server's default) or an integer in [minimum, maximum]."""
    within = count(minimum, maximum)

    def parse(text: str) -> int:
        value = count(0)(text)
        return value if value == 0 else within(text)

    parse.__name__ = "int"
    return parse


def timeout_ms_arg() -> Callable[[str], int]:
    """An argparse type for a timeout in ms: within the range every server allows
    (:mod:`purgatory_client._bounds`); the server's own configured range may be narrower."""
    return count(MIN_TIMEOUT_MS, MAX_TIMEOUT_MS)


def global_options(argv: Sequence[str]) -> list[str]:
    """The options typed before the subcommand (``--target``, ``--purgatory``...), for hints
    that name another command against the same server and purgatory."""
    out: list[str] = []
    words = iter(argv)
    for word in words:
        if not word.startswith("-"):
            break
        out.append(word)
        if word in GLOBAL_VALUED and "=" not in word:
            out.append(next(words, ""))
    return out


# The global options that take a value (cli._add_global_options).
GLOBAL_VALUED = frozenset(
    {"--target", "--purgatory", "--token", "--tls-ca", "--tls-cert", "--tls-key", "--output"}
)
