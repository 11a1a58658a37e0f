"""The Session stream's no-I/O half, shared by the sync and asyncio clients.

Frames are built and acknowledgements parsed here; :class:`WatchSet` is the bookkeeping of
``watch_many``: which watches still owe an outcome and which a frame's acknowledgement
confirmed, so that after a dropped stream a resumed session sends only the unconfirmed
ones, and a fresh one (the server could not resume) re-sends every open one, by id.
Re-sending is safe because registration is idempotent by operation id: the server
registers nothing new and answers an ended one with its outcome (its dedup window).
:class:`Mailbox` (blocking) and :class:`AsyncMailbox` are where ``watch_many`` waits for
what the session's reader hands over: outcomes, and wake-ups (an acknowledgement, the
stream's end).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._models import Event, OperationSpec, OperationStatus, Signal
from purgatory_client._requests import condition_to_proto, signal_to_proto
from purgatory_client._responses import status_from_proto
from purgatory_client.errors import (
    PurgatoryError,
    error_for_code,
)

__all__ = [
    "AsyncMailbox",
    "Mailbox",
    "OutcomeCallback",
    "SessionAck",
    "WatchSet",
    "ack_from_proto",
    "new_session_id",
    "raise_refusal",
    "session_request",
    "settle",
]

# Watches per frame in watch_many: ~100 per message is where the transport carries most.
DEFAULT_FRAME_SIZE = 100

SignalEntry = tuple[str, Signal | None] | str
# Called with each outcome of a session's watches (on its reader thread, or on the loop).
OutcomeCallback = Callable[[Event], None]


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


def ack_from_proto(msg: Any, payloads: Sequence[bytes]) -> SessionAck:
    """A frame's acknowledgement; ``payloads``: those of the frame's watches, in order
    (the server's statuses carry none: the client sent them)."""
    error = None
    if msg.code:
        error = error_for_code(_CODES.get(msg.code, grpc.StatusCode.UNKNOWN), msg.message)
    statuses = zip(msg.operations, payloads, strict=error is None)
    return SessionAck(
        request_id=msg.request_id,
        error=error,
        operations=tuple(status_from_proto(s, p) for s, p in statuses),
        completed_per_signal=tuple(msg.completed_per_signal),
        force_completed=tuple(msg.force_completed),
    )


_CODES = {code.value[0]: code for code in grpc.StatusCode}


class WatchSet:
    """The watches of one ``watch_many`` call that still owe an outcome.

    Watches without an id get a client-made one (``wm-<uuid>``), so a re-sent watch is
    the same operation to the server. ``registered`` are those a frame's acknowledgement
    confirmed: a resumed session owes their outcomes, so only the others are sent again.
    Not thread-safe: one per ``watch_many`` generator.
    """

    __slots__ = ("_open", "_specs", "registered")

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
        self.registered: set[str] = set()

    def __len__(self) -> int:
        return len(self._open)

    def frames(self, frame_size: int, resumed: bool = False) -> Iterator[Sequence[OperationSpec]]:
        """The watches still open (``resumed``: and not registered), in frames of
        ``frame_size``."""
        registered = self.registered if resumed else set()
        pending = [spec for op_id, spec in self._open.items() if op_id not in registered]
        for start in range(0, len(pending), frame_size):
            yield pending[start : start + frame_size]

    def ended(self, event: Event) -> bool:
        """Record an outcome; False if it is not ours or already seen (a re-send)."""
        return self._open.pop(event.operation_id, None) is not None

    def note(self, acks: Sequence[Any], start: int) -> int:
        """Record the watches of the acknowledgements answered from ``acks[start]`` on
        (they answer in frame order); the index of the first one still unanswered."""
        while start < len(acks) and acks[start].done():
            future = acks[start]
            if not future.exception():
                ack = future.result()
                if ack.error is None:
                    self.registered.update(s.operation_id for s in ack.operations)
            start += 1
        return start


def new_session_id() -> str:
    """A name for a resumable session (``SessionRequest.session_id``)."""
    return f"ws-{uuid.uuid4().hex}"


def settle(acks: Iterable[Any]) -> None:
    """Take the errors of the acknowledgements that failed with their stream (the stream's
    error says it), so that none is reported as an exception never retrieved."""
    for future in acks:
        if future.done() and not future.cancelled():
            future.exception()


def raise_refusal(acks: Iterable[Any]) -> None:
    """Raise the error of the first frame the server refused, among the acknowledgements
    (futures of :class:`SessionAck`) answered so far."""
    for future in acks:
        if future.done() and not future.exception():
            error = future.result().error
            if error is not None:
                raise error


class Mailbox:
    """Outcomes and wake-ups handed from a blocking session's reader thread to the one
    thread running ``watch_many``. ``put`` blocks while ``capacity`` outcomes wait to be
    taken (the reader then reads no more: the server is pushed back)."""

    __slots__ = ("_closed", "_queue")

    def __init__(self, capacity: int = 10_000) -> None:
        self._queue: queue.Queue[Event | None] = queue.Queue(max(1, capacity))
        self._closed = False

    def put(self, event: Event) -> None:
        if not self._closed:
            self._queue.put(event)

    def close(self) -> None:
        """Nobody takes any more: a reader blocked in :meth:`put` goes on (and ends)."""
        self._closed = True
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()

    def wake(self) -> None:
        # A full mailbox wakes its reader anyway: a wake-up that does not fit is not needed.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)

    def wake_on_done(self, _future: object) -> None:
        self.wake()

    def take(self) -> list[Event]:
        """Wait for an outcome or a wake-up, then take every outcome there is."""
        items = [self._queue.get()]
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return [item for item in items if item is not None]

    def empty(self) -> bool:
        return self._queue.empty()


class AsyncMailbox:
    """:class:`Mailbox` for asyncio: the session's reader and ``watch_many`` share the
    event loop. ``put`` waits while ``capacity`` outcomes wait to be taken."""

    __slots__ = ("_capacity", "_closed", "_ready", "_room", "_wake")

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = max(1, capacity)
        self._ready: list[Event] = []
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._closed = False

    async def put(self, event: Event) -> None:
        while len(self._ready) >= self._capacity and not self._closed:
            self._room.clear()
            await self._room.wait()
        if not self._closed:
            self._ready.append(event)
            self._wake.set()

    def close(self) -> None:
        """Nobody takes any more: a reader waiting in :meth:`put` goes on (and ends)."""
        self._closed = True
        self._ready.clear()
        self._room.set()

    def wake(self) -> None:
        self._wake.set()

    def wake_on_done(self, _future: object) -> None:
        self._wake.set()

    async def take(self) -> list[Event]:
        """Wait for an outcome or a wake-up, then take every outcome there is."""
        await self._wake.wait()
        self._wake.clear()
        ready, self._ready = self._ready, []
        self._room.set()
        return ready

    def empty(self) -> bool:
        return not self._ready
