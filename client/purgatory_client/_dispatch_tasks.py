"""What the batching dispatcher sends, and how one batch maps onto a Session frame.

A batch of tasks becomes one ``SessionRequest``: its watches, signals and force-completes
(the server applies the watches first, then the signals in order, then the
force-completes). The frame's acknowledgement gives each task its value: a watch its
:class:`OperationStatus` at registration, a signal the number of operations it completed,
a force-complete whether it ended the operation. No I/O here.

One bad task does not sink its batch: the server checks a whole frame before changing
anything and names the offending element in its error (``watches[3].keys[0]: ...``), so
an error that names one element is pinned on that task (:attr:`BatchOutcome.culprit`);
the core fails it alone and sends the others again (:mod:`._batcher`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from purgatory_client._batcher import BatchOutcome, ProcessingResult, classify
from purgatory_client._models import OperationSpec, Signal
from purgatory_client._session_base import SessionAck, SignalEntry
from purgatory_client.errors import PurgatoryError

__all__ = [
    "ForceCompleteTask",
    "SignalTask",
    "WatchTask",
    "culprit",
    "outcome_of_ack",
    "split_batch",
]


@dataclass(frozen=True, slots=True)
class SignalTask:
    key: str
    signal: Signal | None = None


@dataclass(frozen=True, slots=True)
class WatchTask:
    spec: OperationSpec


@dataclass(frozen=True, slots=True)
class ForceCompleteTask:
    operation_id: str


Task = SignalTask | WatchTask | ForceCompleteTask

# A frame element named at the start of an error message, and its kind (FrameParts.places).
_ELEMENT = re.compile(r"(watches|signals|force_complete)\[(\d+)\]")
_KINDS = {"watches": 0, "signals": 1, "force_complete": 2}


@dataclass(frozen=True, slots=True)
class FrameParts:
    watches: list[OperationSpec]
    signals: list[SignalEntry]
    force_complete: list[str]
    # Per task: (kind, index in its list), kind 0 watch, 1 signal, 2 force.
    places: list[tuple[int, int]]


def split_batch(tasks: Sequence[Task]) -> FrameParts:
    parts = FrameParts([], [], [], [])
    for task in tasks:
        if isinstance(task, SignalTask):
            parts.places.append((1, len(parts.signals)))
            parts.signals.append((task.key, task.signal))
        elif isinstance(task, WatchTask):
            parts.places.append((0, len(parts.watches)))
            parts.watches.append(task.spec)
        else:
            parts.places.append((2, len(parts.force_complete)))
            parts.force_complete.append(task.operation_id)
    return parts


def culprit(parts: FrameParts, error: PurgatoryError) -> int | None:
    """The position in the batch of the task ``error`` names, if it names exactly one."""
    match = _ELEMENT.match(error.details)
    if match is None:
        return None
    place = (_KINDS[match.group(1)], int(match.group(2)))
    try:
        return parts.places.index(place)
    except ValueError:
        return None


def outcome_of_ack(parts: FrameParts, ack: SessionAck) -> BatchOutcome:
    if ack.error is not None:
        result = classify(ack.error.code)
        blamed = culprit(parts, ack.error) if result is ProcessingResult.PERMANENT_ERROR else None
        return BatchOutcome(result, error=ack.error, culprit=blamed)
    lists: tuple[Sequence[Any], ...] = (
        ack.operations,
        ack.completed_per_signal,
        ack.force_completed,
    )
    return BatchOutcome(ProcessingResult.SUCCESS, [lists[k][i] for k, i in parts.places])


def outcome_of_error(error: PurgatoryError) -> BatchOutcome:
    return BatchOutcome(classify(error.code), error=error)
