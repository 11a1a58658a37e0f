"""What the batching dispatcher sends, and how one batch maps onto a Session frame.

A batch of tasks becomes one ``SessionRequest``: its watches, signals and force-completes
(the server applies the watches first, then the signals in order, then the
force-completes). The frame's acknowledgement gives each task its value: a watch its
:class:`OperationStatus` at registration, a signal the number of operations it completed,
a force-complete whether it ended the operation. No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from purgatory_client._batcher import BatchOutcome, ProcessingResult, classify
from purgatory_client._models import OperationSpec, Signal
from purgatory_client._session_base import SessionAck, SignalEntry
from purgatory_client.errors import PurgatoryError

__all__ = ["ForceCompleteTask", "SignalTask", "WatchTask", "outcome_of_ack", "split_batch"]


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


def outcome_of_ack(parts: FrameParts, ack: SessionAck) -> BatchOutcome:
    if ack.error is not None:
        return BatchOutcome(classify(ack.error.code), error=ack.error)
    lists: tuple[Sequence[Any], ...] = (
        ack.operations,
        ack.completed_per_signal,
        ack.force_completed,
    )
    return BatchOutcome(ProcessingResult.SUCCESS, [lists[k][i] for k, i in parts.places])


def outcome_of_error(error: PurgatoryError) -> BatchOutcome:
    return BatchOutcome(classify(error.code), error=error)
