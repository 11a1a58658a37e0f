"""The Session stream's no-I/O half, shared by the sync and asyncio clients.

Frames are built and acknowledgements parsed here; :class:`WatchSet` is the bookkeeping of
``watch_many``: which watches still owe an outcome, so that after a dropped stream (the
server's slow-reader RESOURCE_EXHAUSTED, or UNAVAILABLE across a restart) a new stream
re-sends exactly those, by id. Re-sending is safe because registration is idempotent by
operation id: the server registers nothing new and answers an ended one with its outcome.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._base import (
    ResumePolicy,
    condition_to_proto,
    signal_to_proto,
    status_from_proto,
)
from purgatory_client._models import Event, OperationSpec, OperationStatus, Signal
from purgatory_client.errors import (
    PurgatoryError,
    ResourceExhaustedError,
    UnavailableError,
    error_for_code,
)

__all__ = ["SessionAck", "WatchSet", "ack_from_proto", "session_request"]

# Watches per frame in watch_many: ~100 per message is where the transport carries most.
DEFAULT_FRAME_SIZE = 100

SignalEntry = tuple[str, Signal | None] | str


@dataclass(frozen=True)
class SessionAck:
    """The server's answer to one frame; ``error`` is None when it was applied."""

    request_id: int
    error: PurgatoryError | None
    operations: tuple[OperationStatus, ...]
    completed_per_signal: tuple[int, ...]
    force_completed: tuple[bool, ...]


def spec_to_proto(spec: OperationSpec) -> Any:
    return pb.OperationSpec(
        operation_id=spec.operation_id,
        keys=list(spec.keys),
        timeout_ms=spec.timeout_ms,
        condition=condition_to_proto(spec.condition),
        payload=spec.payload,
        due_time_ms=spec.due_time_ms,
        extend_on_resend=spec.extend_on_resend,
        max_extend_ms=spec.max_extend_ms,
    )


def session_request(
    request_id: int,
    purgatory: str,
    watches: Iterable[OperationSpec] = (),
    signals: Iterable[SignalEntry] = (),
    force_complete: Iterable[str] = (),
) -> Any:
    frame = pb.SessionRequest(request_id=request_id, purgatory=purgatory)
    if watches:
        frame.watches.extend(spec_to_proto(s) for s in watches)
    add = frame.signals.add
    for entry in signals:
        if isinstance(entry, str):
            add(key=entry)
        elif entry[1] is None:
            add(key=entry[0])
        else:
            add(key=entry[0], signal=signal_to_proto(entry[1]))
    frame.force_complete.extend(force_complete)
    return frame


def ack_from_proto(msg: Any) -> SessionAck:
    error = None
    if msg.code:
        error = error_for_code(_CODES.get(msg.code, grpc.StatusCode.UNKNOWN), msg.message)
    return SessionAck(
        request_id=msg.request_id,
        error=error,
        operations=tuple(status_from_proto(s) for s in msg.operations),
        completed_per_signal=tuple(msg.completed_per_signal),
        force_completed=tuple(msg.force_completed),
    )


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def is_resumable(error: PurgatoryError) -> bool:
    """A stream error after which a new stream and a re-send by id are the remedy."""
    return isinstance(error, ResourceExhaustedError | UnavailableError)


class Backoff:
    """Re-open delays of ``watch_many``: ``policy.attempts`` in a row without an outcome,
    doubling from ``initial_delay_s`` up to ``max_delay_s``; an outcome resets it."""

    __slots__ = ("_failures", "_policy")

    def __init__(self, policy: ResumePolicy) -> None:
        self._policy = policy
        self._failures = 0

    def progress(self) -> None:
        self._failures = 0

    def delay(self, error: PurgatoryError) -> float:
        """Seconds before re-opening; re-raises ``error`` if that will not help."""
        if not is_resumable(error) or self._policy.exhausted(self._failures):
            raise error
        delay = self._policy.delay_s(self._failures)
        self._failures += 1
        # A refusal naming the owner (_routing): the re-opened stream goes there at once.
        return 0.0 if error.metadata.get("purgatory-owner") else delay


class WatchSet:
    """The watches of one ``watch_many`` call that still owe an outcome.

    Watches without an id get a client-made one (``wm-<uuid>``), so a re-sent watch is
    the same operation to the server. Not thread-safe: one per ``watch_many`` generator.
    """

    __slots__ = ("_open", "_specs")

    def __init__(self, specs: Iterable[OperationSpec]) -> None:
        self._specs: dict[str, OperationSpec] = {}
        for given in specs:
            spec = given
            if not spec.operation_id:
                spec = replace(spec, operation_id=f"wm-{uuid.uuid4().hex}")
            if spec.operation_id in self._specs:
                raise ValueError(f"operation_id {spec.operation_id!r} repeated")
            self._specs[spec.operation_id] = spec
        self._open = dict(self._specs)

    def __len__(self) -> int:
        return len(self._open)

    def frames(self, frame_size: int) -> Iterator[Sequence[OperationSpec]]:
        """The watches still open, in frames of ``frame_size``."""
        pending = list(self._open.values())
        for start in range(0, len(pending), frame_size):
            yield pending[start : start + frame_size]

    def ended(self, event: Event) -> bool:
        """Record an outcome; False if it is not ours or already seen (a re-send)."""
        return self._open.pop(event.operation_id, None) is not None
