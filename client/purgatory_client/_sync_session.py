"""SyncSession: one open ``Session`` stream for the blocking client, and the client's
``session()`` that opens it (:class:`SessionMethods`).

gRPC's sync API consumes a request iterator on its own thread: frames go through a queue
that iterator reads. A reader thread matches acknowledgements to
:class:`concurrent.futures.Future` objects by request id and hands outcomes to
``on_outcome`` or to a bounded queue (a full queue stops the reader, so a caller that
stops consuming is felt by the server, not by this process's memory).

Thread safety: :meth:`submit` and :meth:`send` may be called from any thread; one thread
at a time should iterate :meth:`outcomes`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any

import grpc

from purgatory_client._base import ClientBase
from purgatory_client._liveness import SessionLiveness, StreamReader
from purgatory_client._models import Event, OperationSpec
from purgatory_client._responses import event_from_proto
from purgatory_client._session_base import (
    OutcomeCallback,
    SessionAck,
    SignalEntry,
    ack_from_proto,
    session_request,
)
from purgatory_client.errors import PurgatoryError, UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["SessionMethods", "SyncSession"]

_END = object()


class SessionMethods(ClientBase):
    """``session()``: a Session stream of this client (a mix-in of the client)."""

    def session(
        self,
        *,
        purgatory: str | None = None,
        on_outcome: OutcomeCallback | None = None,
        outcome_buffer: int = 10_000,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
        session_id: str = "",
        resume_after: int | None = None,
    ) -> SyncSession:
        """Open a Session stream (many watches, signals and force-completes per message;
        each watched operation's outcome as soon as it ends, on the stream's reader thread).

        ``heartbeat_interval_ms`` (0: none): the server sends a heartbeat whenever the
        stream was idle that long (``session.liveness`` counts them); ``dead_after_s``
        (needs heartbeats): a stream silent that long is treated as dead and ends with
        :class:`UnavailableError`, failing its unanswered acknowledgements.

        ``session_id`` names the session so that the server keeps what it still owes when
        the stream ends early; ``resume_after`` (with it; the ``delivered`` of the stream
        that ended) takes that over: the outcomes after it come on this stream, with no
        watch re-sent. A refused resume ends this stream with the server's error
        (NotFoundError, OutOfRangeError or FailedPreconditionError: re-send instead)."""
        name = self._name(purgatory)
        self._find_owner(name)
        session = SyncSession(
            functools.partial(
                self._router.method(name, self._stub.Session),
                metadata=with_trace(self._metadata),  # the caller's trace context, now
            ),
            name,
            on_outcome=on_outcome,
            outcome_buffer=outcome_buffer,
            timeout=self.timeout,
            heartbeat_interval_ms=heartbeat_interval_ms,
            dead_after_s=dead_after_s,
            session_id=session_id,
            resume_after=resume_after,
        )
        session.add_end_callback(lambda: self._router.learn(name, session.error))
        return session


class SyncSession:
    """A Session stream (blocking); see :class:`~purgatory_client.AsyncSession`."""

    def __init__(
        self,
        method: Callable[..., Any],
        purgatory: str,
        *,
        on_outcome: OutcomeCallback | None = None,
        outcome_buffer: int = 10_000,
        timeout: float | None = 30.0,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
        session_id: str = "",
        resume_after: int | None = None,
    ) -> None:
        self.purgatory = purgatory
        self.timeout = timeout
        self._frames: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        # Each unanswered frame's future, with its watches' payloads (for the answer).
        self._acks: dict[int, tuple[Future[SessionAck], tuple[bytes, ...]]] = {}
        self._on_outcome = on_outcome
        self._queue: queue.Queue[Any] = queue.Queue(outcome_buffer)
        self.error: PurgatoryError | None = None
        self._finished = threading.Event()
        self._writing = True
        self._end_callbacks: list[Callable[[], None]] = []
        # Heartbeats and dead-stream detection (see AsyncSession); the liveness-only
        # frame goes first.
        self.liveness = SessionLiveness(
            heartbeat_interval_ms, dead_after_s, session_id, resume_after
        )
        # The number of the last outcome received (SessionResponse.delivered_through):
        # where a resume of this session starts.
        self.delivered = 0
        opening = self.liveness.opening_frame()
        if opening is not None:
            self._frames.put(opening)
        self._call = method(self._frame_iterator())
        self._reader = threading.Thread(target=self._read, name="purgatory-session", daemon=True)
        self._reader.start()

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def add_end_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (on the reader thread) once the stream has ended."""
        with self._lock:
            if not self._finished.is_set():
                self._end_callbacks.append(callback)
                return
        callback()

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def submit(
        self,
        *,
        watches: Iterable[OperationSpec] = (),
        signals: Iterable[SignalEntry] = (),
        force_complete: Iterable[str] = (),
        purgatory: str | None = None,
    ) -> Future[SessionAck]:
        """Queue one frame; the future resolves with its acknowledgement."""
        future: Future[SessionAck] = Future()
        with self._lock:
            if self._finished.is_set() or not self._writing:
                raise self._ended_error()
            request_id = next(self._ids)
            watches = tuple(watches)
            self._acks[request_id] = (future, tuple(w.payload for w in watches))
            frame = session_request(
                request_id,
                self.purgatory if purgatory is None else purgatory,
                watches,
                signals,
                force_complete,
            )
            self._frames.put(frame)
        return future

    def submit_all(
        self, frames: Iterable[Sequence[OperationSpec]], on_ack: Callable[[object], None]
    ) -> list[Future[SessionAck]]:
        """Queue one frame of watches per item of ``frames``, then :meth:`done_writing`
        (queued frames are written by gRPC's own thread, as the server reads them: a
        server that pushes back never blocks the caller). Returns the acknowledgements'
        futures, ``on_ack`` called when each resolves; a stream that ends stops it."""
        acks: list[Future[SessionAck]] = []
        with contextlib.suppress(PurgatoryError):
            for frame in frames:
                future = self.submit(watches=frame)
                future.add_done_callback(on_ack)
                acks.append(future)
            self.done_writing()
        return acks

    def send(
        self,
        *,
        watches: Iterable[OperationSpec] = (),
        signals: Iterable[SignalEntry] = (),
        force_complete: Iterable[str] = (),
        purgatory: str | None = None,
    ) -> SessionAck:
        """Send one frame and wait (up to ``timeout``) for its acknowledgement."""
        future = self.submit(
            watches=watches, signals=signals, force_complete=force_complete, purgatory=purgatory
        )
        return future.result(self.timeout)

    def done_writing(self) -> None:
        with self._lock:
            if self._writing:
                self._writing = False
                self._frames.put(_END)

    def outcomes(self) -> Iterator[Event]:
        while True:
            item = self._queue.get()
            if item is _END:
                self._queue.put(_END)
                if self.error is not None:
                    raise self.error
                return
            yield item

    def close(self) -> None:
        self.done_writing()
        self._call.cancel()
        self._reader.join(10.0)

    # ------------------------------------------------------------------ threads
    def _frame_iterator(self) -> Iterator[Any]:
        while True:
            frame = self._frames.get()
            if frame is _END:
                return
            yield frame

    def _ended_error(self) -> PurgatoryError:
        if self.error is not None:
            return self.error
        return UnavailableError(grpc.StatusCode.UNAVAILABLE, "session stream ended")

    def _read(self) -> None:
        error: PurgatoryError | None = None
        reader = StreamReader(self._call, self.liveness.dead_after_s, "purgatory-session-watchdog")
        try:
            while (message := reader.next()) is not None:
                error = self._take(message)
                if error is not None:
                    break
            error = error or reader.silent
            if error is not None:
                self._call.cancel()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                error = from_rpc_error(exc)
        finally:
            reader.close()
            self._finish(error)

    def _take(self, message: Any) -> PurgatoryError | None:
        """One message from the server; returns the error that ends the stream, if any
        (the opening frame refused)."""
        if self.liveness.heartbeat(message):
            return None
        refused = self.liveness.refused(message)
        if refused is not None:
            return refused
        if message.HasField("ack"):
            with self._lock:
                waiting = self._acks.pop(message.ack.request_id, None)
            if waiting is not None:
                waiting[0].set_result(ack_from_proto(message.ack, waiting[1]))
        for raw in message.outcomes:
            event = event_from_proto(raw)
            if self._on_outcome is not None:
                self._on_outcome(event)  # (a bounded consumer blocks here: flow control)
            else:
                self._queue.put(event)
        if message.delivered_through:
            self.delivered = message.delivered_through
        return None

    def _finish(self, error: PurgatoryError | None) -> None:
        """The stream has ended: fail what is unanswered, mark the end of the outcomes."""
        with self._lock:
            self.error = error
            self._finished.set()
            self._writing = False
            self._frames.put(_END)
            failure = self._ended_error()
            pending, self._acks = self._acks, {}
            callbacks, self._end_callbacks = self._end_callbacks, []
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(failure)
        while True:
            try:
                self._queue.put_nowait(_END)
                break
            except queue.Full:
                self._queue.get_nowait()
        for callback in callbacks:
            callback()
