"""``purgatory batch signal|watch``: many signals or watches from stdin, one per line.

Signals go through the batching dispatcher (Eureka's task batcher over one Session
stream); watches go through ``watch_many`` and each outcome is printed as a JSON line as
soon as it ends. A line is either plain words or a JSON object:

    signal:  KEY                        or {"key": "k", "amount": 1, "value": 7,
                                            "source": "r1", "data": "text"}
    watch:   ID KEY [KEY...]            or {"id": "op", "keys": ["a"], "timeout_ms": 500,
                                            "payload": "text"}

Blank lines and lines starting with ``#`` are skipped. A malformed line stops before
anything is sent (exit 2, naming the line).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any, TextIO

from purgatory_client._batcher import DispatcherConfig
from purgatory_client._cli_common import Context, Emit, count, parse_condition, timeout_ms_arg
from purgatory_client._models import Condition, OperationSpec, Signal
from purgatory_client._sync import PurgatoryClient
from purgatory_client.errors import PurgatoryError

__all__ = ["BadLine", "register"]


class BadLine(ValueError):
    """A stdin line that is not a signal or watch (``line`` is 1-based)."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")


def register(sub: Any) -> None:
    batch = sub.add_parser(
        "batch",
        help="signals or watches from stdin, one per line",
        epilog="example: printf 'k1\\nk2\\n' | purgatory batch signal",
    )
    batch.add_argument("kind", choices=["signal", "watch"], help="what each line is")
    batch.add_argument(
        "--timeout-ms", type=timeout_ms_arg(), default=30_000, help="watches' default (30000)"
    )
    batch.add_argument(
        "--condition",
        type=parse_condition,
        default=Condition.any_key(),
        help="watches' condition; syntax as in purgatory watch --help (e.g. min:2)",
    )
    batch.add_argument("--batch-size", type=count(1), default=500, help="tasks per frame")
    batch.set_defaults(handler=_batch)


def _lines(stream: TextIO) -> Iterable[tuple[int, str]]:
    for number, raw in enumerate(stream, 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, line


SIGNAL_FIELDS = ("key", "amount", "value", "source", "data")
WATCH_FIELDS = ("id", "keys", "timeout_ms", "payload")


def _object(number: int, line: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """The line's JSON object; an unknown field (a typo such as ``operation_id`` for
    ``id``) is refused rather than ignored, which would make up an id."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadLine(number, f"invalid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise BadLine(number, "a JSON line must be an object")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise BadLine(number, f"unknown field {unknown[0][:100]!r} (known: {', '.join(fields)})")
    return value


def parse_signal(number: int, line: str) -> tuple[str, Signal | None]:
    if not line.startswith("{"):
        words = line.split()
        if len(words) != 1:
            raise BadLine(number, "expected one KEY (or a JSON object)")
        return words[0], None
    obj = _object(number, line, SIGNAL_FIELDS)
    try:
        key = obj["key"]
        signal = Signal(
            amount=int(obj.get("amount", 0)),
            value=None if obj.get("value") is None else int(obj["value"]),
            source=str(obj.get("source", "")),
            data=str(obj.get("data", "")).encode(),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadLine(number, f"bad signal: {exc!r}") from None
    if not isinstance(key, str):
        raise BadLine(number, "key must be a string")
    return key, signal


def parse_watch(number: int, line: str, timeout_ms: int, condition: Condition) -> OperationSpec:
    if not line.startswith("{"):
        words = line.split()
        if len(words) < 2:
            raise BadLine(number, "expected ID KEY [KEY...] (or a JSON object)")
        return OperationSpec(tuple(words[1:]), timeout_ms, condition, operation_id=words[0])
    obj = _object(number, line, WATCH_FIELDS)
    try:
        return OperationSpec(
            tuple(str(k) for k in obj.get("keys", ())),
            int(obj.get("timeout_ms", timeout_ms)),
            condition,
            payload=str(obj.get("payload", "")).encode(),
            operation_id=str(obj.get("id", "")),
        )
    except (TypeError, ValueError) as exc:
        raise BadLine(number, f"bad watch: {exc!r}") from None


def _batch(args: argparse.Namespace, ctx: Context) -> int:
    stream = sys.stdin
    try:
        if args.kind == "watch":
            specs = [
                parse_watch(n, line, args.timeout_ms, args.condition) for n, line in _lines(stream)
            ]
        else:
            signals = [(n, *parse_signal(n, line)) for n, line in _lines(stream)]
    except BadLine as exc:
        sys.stderr.write(f"purgatory: {exc}\n")
        return 2
    if args.kind == "watch":
        for event in ctx.client.watch_many(specs, frame_size=max(1, args.batch_size)):
            ctx.emit(event)
        return 0
    return _signals(ctx.client, signals, args.batch_size, ctx.emit)


def _signals(
    client: PurgatoryClient,
    signals: list[tuple[int, str, Signal | None]],
    batch_size: int,
    emit: Emit,
) -> int:
    config = DispatcherConfig(max_batch_size=max(1, batch_size), max_buffer_size=1 << 30)
    futures: list[tuple[int, Future[int]]] = []
    with client.dispatcher(config) as dispatcher:
        for number, key, signal in signals:
            futures.append((number, dispatcher.signal(key, signal)))
        dispatcher.flush(None)
        counters = dispatcher.counters
    completed = failed = 0
    for number, future in futures:
        try:
            completed += future.result(0)
        except PurgatoryError as exc:
            failed += 1
            sys.stderr.write(f"purgatory: line {number}: {exc}\n")
    emit(
        {
            "signals": len(futures),
            "completed": completed,
            "failed": failed,
            "batches": counters.batches,
            "retried": counters.retried,
        }
    )
    return 1 if failed else 0
