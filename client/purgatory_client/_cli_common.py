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
import base64
import dataclasses
import enum
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from purgatory_client._models import Condition
from purgatory_client._sync import PurgatoryClient

__all__ = ["CONDITION_HELP", "Context", "Emit", "Handler", "emit_json", "parse_condition"]

Emit = Callable[[Any], None]


@dataclasses.dataclass(frozen=True)
class Context:
    """One run of a subcommand: the client, where results go (``emit``: one JSON line
    each) and the command line as typed (for hints that repeat it)."""

    client: PurgatoryClient
    emit: Emit
    argv: Sequence[str] = ()


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


CONDITION_HELP = (
    "when the operation completes: any (the first signal on any key, the default), all "
    "(every key signalled), min:N (N signals), min-distinct:N (N distinct --source values), "
    "sum:N (signals' --amount adds up to N), values:N (every key's latest --value >= N); "
    "e.g. --condition min-distinct:2"
)


def _jsonable(value: Any, text: bool = False) -> Any:
    """JSON-ready ``value``; bytes are base64 (exact for any bytes), or with ``text`` UTF-8
    where invalid sequences become U+FFFD (readable, but lossy for binary data)."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") if text else base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name), text) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, text) for v in value]
    return value


def emit_json(value: Any, text: bool = False) -> None:
    """Print ``value`` as one JSON line (see :func:`_jsonable` for bytes) and flush."""
    sys.stdout.write(json.dumps(_jsonable(value, text), sort_keys=True) + "\n")
    sys.stdout.flush()
