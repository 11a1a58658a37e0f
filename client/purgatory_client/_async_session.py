"""AsyncSession: one open ``Session`` stream for the asyncio client, and the client's
``session()`` that opens it (:class:`AsyncSessionMethods`).

Frames are written as they are submitted (many may be in flight); a reader task matches
acknowledgements to their futures by request id and hands outcomes to ``on_outcome`` or to
a bounded queue read by :meth:`AsyncSession.outcomes` (an ``on_outcome`` that returns an
awaitable is awaited). A full queue stops the reader, so a caller that stops consuming
outcomes is felt by the server (it stops reading frames past its bound: flow control)
instead of growing memory here. ``delivered`` is the number of the last outcome received:
with ``session_id``, a new stream resumes the session from it (``resume_after``).

Thread safety: loop-confined, one event loop. Any number of tasks may submit at once
(writes take turns: gRPC allows one pending write per call).

Written by hand, not generated like most of the blocking client: gRPC's asyncio API
writes frames with ``call.write()``, its blocking API reads them from a request iterator
on its own thread (``_sync_session``); tests/client/test_twins.py keeps the two alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import grpc

from purgatory_client._base import ClientBase
from purgatory_client._liveness import AsyncStreamReader, SessionLiveness
from purgatory_client._models import Event, OperationSpec
from purgatory_client._responses import event_from_proto
from purgatory_client._session_base import (
    SessionAck,
    SignalEntry,
    ack_from_proto,
    session_request,
)
from purgatory_client.errors import PurgatoryError, UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["AsyncOutcomeCallback", "AsyncSession", "AsyncSessionMethods"]

# Called with each outcome on the loop; an awaitable result is awaited before the next
# message is read (a bounded consumer pushes back on the server: flow control).
AsyncOutcomeCallback = Callable[[Event], Awaitable[None] | None]


class AsyncSessionMethods(ClientBase):
    """``session()``: a Session stream of this client (a mix-in of the client)."""

    def session(
        self,
        *,
        purgatory: str | None = None,
        on_outcome: AsyncOutcomeCallback | None = None,
        outcome_buffer: int = 10_000,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
        session_id: str = "",
        resume_after: int | None = None,
    ) -> AsyncSession:
        """Open a Session stream (many watches, signals and force-completes per message;
        each watched operation's outcome as soon as it ends). Must be called on the loop.

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
        session = AsyncSession(
            None,
            name,
            connect=lambda: self._session_call(name),
            on_outcome=on_outcome,
            outcome_buffer=outcome_buffer,
            heartbeat_interval_ms=heartbeat_interval_ms,
            dead_after_s=dead_after_s,
            session_id=session_id,
            resume_after=resume_after,
        )
        session.add_end_callback(lambda: self._router.learn(name, session.error))
        return session

    async def _session_call(self, name: str) -> Any:
        """The Session call, opened where ``name`` lives (a probe first if unknown)."""
        await self._find_owner(name)
        # The caller's trace context when session() was called (this runs in the reader
        # task, which copied it): the frames' registrations carry it (traceparent).
        return self._router.method(name, self._stub.Session)(metadata=with_trace(self._metadata))


class AsyncSession:
    """A Session stream: ``submit`` frames, await their acknowledgements, read outcomes.

    Use ``async with client.session() as session``. Errors are the client's
    :mod:`~purgatory_client.errors` tree; a frame the server refused resolves its
    acknowledgement with ``ack.error`` set (the stream goes on), a stream that ends with an
    error fails every unanswered acknowledgement and :meth:`outcomes` with it.
    """

    def __init__(
        self,
        call: Any,
        purgatory: str,
        *,
        on_outcome: AsyncOutcomeCallback | None = None,
        outcome_buffer: int = 10_000,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
        session_id: str = "",
        resume_after: int | None = None,
        connect: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        # Heartbeats: the server sends one whenever the stream was idle for
        # ``heartbeat_interval_ms``; ``liveness.heartbeats`` counts them and
        # ``liveness.server_time_ms`` is the server's clock in the latest. With
        # ``dead_after_s``, a stream silent that long (no message, no heartbeat) is
        # cancelled and ends with UnavailableError ("... treated as dead").
        self.liveness = SessionLiveness(
            heartbeat_interval_ms, dead_after_s, session_id, resume_after
        )
        # The number of the last outcome received (SessionResponse.delivered_through):
        # where a resume of this session starts.
        self.delivered = 0
        # Without ``call``, the reader opens it with ``connect()`` (the client finds the
        # purgatory's owner first, _routing); submitters wait for ``_opened``.
        self._connect = connect
        self._call: Any = call
        self.purgatory = purgatory
        self._ids = itertools.count(1)
        # Each unanswered frame's future, with its watches' payloads (for the answer).
        self._acks: dict[int, tuple[asyncio.Future[SessionAck], tuple[bytes, ...]]] = {}
        self._on_outcome = on_outcome
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(outcome_buffer)
        self.error: PurgatoryError | None = None
        self._finished = False
        # gRPC allows one pending write per call: concurrent submitters take turns.
        self._write_lock = asyncio.Lock()
        # Set once the liveness-only frame (if any) is written: frames and done_writing
        # wait for it, so it is the stream's first message.
        self._opened = asyncio.Event()
        if self.liveness.opening_frame() is None and self._call is not None:
            self._opened.set()
        self._writer: asyncio.Future[None] | None = None  # submit_all's task
        self._reader = asyncio.ensure_future(self._read())

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def add_end_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the stream has ended (at once if it has)."""
        self._reader.add_done_callback(lambda _: callback())

    @property
    def finished(self) -> bool:
        """True once the stream has ended (``error`` says how)."""
        return self._finished

    async def submit(
        self,
        *,
        watches: Iterable[OperationSpec] = (),
        signals: Iterable[SignalEntry] = (),
        force_complete: Iterable[str] = (),
        purgatory: str | None = None,
    ) -> asyncio.Future[SessionAck]:
        """Write one frame; the returned future resolves with its acknowledgement."""
        if self._finished:
            raise self._ended_error()
        request_id = next(self._ids)
        watches = tuple(watches)
        frame = session_request(
            request_id,
            self.purgatory if purgatory is None else purgatory,
            watches,
            signals,
            force_complete,
        )
        future: asyncio.Future[SessionAck] = asyncio.get_running_loop().create_future()
        self._acks[request_id] = (future, tuple(w.payload for w in watches))
        try:
            await self._opened.wait()
            if self._call is None:  # ended before it was opened
                raise asyncio.InvalidStateError("session stream ended")
            async with self._write_lock:
                await self._call.write(frame)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            self._acks.pop(request_id, None)
            await asyncio.wait((self._reader,), timeout=5.0)
            raise self._ended_error() from exc
        return future

    async def send(
        self,
        *,
        watches: Iterable[OperationSpec] = (),
        signals: Iterable[SignalEntry] = (),
        force_complete: Iterable[str] = (),
        purgatory: str | None = None,
    ) -> SessionAck:
        """Write one frame and await its acknowledgement."""
        future = await self.submit(
            watches=watches, signals=signals, force_complete=force_complete, purgatory=purgatory
        )
        return await future

    async def submit_all(
        self, frames: Iterable[Sequence[OperationSpec]], on_ack: Callable[[object], None]
    ) -> list[asyncio.Future[SessionAck]]:
        """Write one frame of watches per item of ``frames``, then :meth:`done_writing`,
        in a task: a server that pushes back (it reads no more frames while this session
        owes it its bound) blocks that task, not the caller, who goes on reading
        outcomes. Each acknowledgement's future joins the returned list as its frame is
        written, ``on_ack`` called when it resolves; a stream that ends stops the task."""
        acks: list[asyncio.Future[SessionAck]] = []

        async def write_all() -> None:
            with contextlib.suppress(PurgatoryError):
                for frame in frames:
                    future = await self.submit(watches=frame)
                    future.add_done_callback(on_ack)
                    acks.append(future)
                await self.done_writing()

        self._writer = asyncio.ensure_future(write_all())
        return acks

    async def done_writing(self) -> None:
        """No more frames: the server ends the stream once every outcome is sent."""
        with contextlib.suppress(grpc.RpcError, asyncio.InvalidStateError):
            await self._opened.wait()
            if self._call is None:
                return
            async with self._write_lock:
                await self._call.done_writing()

    async def outcomes(self) -> AsyncIterator[Event]:
        """Outcomes as they end, until the stream ends (raises its error, if any)."""
        while True:
            event = await self._queue.get()
            if event is None:
                self._queue.put_nowait(None)  # later readers see the end too
                if self.error is not None:
                    raise self.error
                return
            yield event

    async def close(self) -> None:
        """Cancel the stream (pending acknowledgements fail) and stop the reader."""
        if self._writer is not None:
            self._writer.cancel()
        if self._call is not None:
            self._call.cancel()
        else:
            self._reader.cancel()  # still finding the owner
        with contextlib.suppress(BaseException):
            await self._reader

    # ------------------------------------------------------------------ reader
    def _ended_error(self) -> PurgatoryError:
        if self.error is not None:
            return self.error
        return UnavailableError(grpc.StatusCode.UNAVAILABLE, "session stream ended")

    async def _read(self) -> None:
        error: PurgatoryError | None = None
        try:
            reader = await self._start()
            while (message := await reader.next()) is not None:
                error = await self._take(message)
                if error is not None:
                    break
            error = error or reader.silent
            if error is not None:
                self._call.cancel()
        except asyncio.InvalidStateError:
            pass  # the call was cancelled while the opening frame was written
        except grpc.RpcError as exc:
            if (
                exc.code() != grpc.StatusCode.CANCELLED
                or self._call is None
                or not self._call.cancelled()
            ):
                error = from_rpc_error(exc)
        except asyncio.CancelledError:
            pass
        finally:
            self._finish(error)

    async def _start(self) -> AsyncStreamReader:
        """Open the call if the client has not (``connect``), then write the
        liveness-only frame, if any, before any submitted frame."""
        if self._call is None and self._connect is not None:
            self._call = await self._connect()
        opening = self.liveness.opening_frame()
        if opening is not None:
            try:
                await self._call.write(opening)
            finally:
                self._opened.set()  # submitters waited for it: it goes first
        self._opened.set()
        return AsyncStreamReader(
            self._call, self.liveness.dead_after_s, "purgatory-session-watchdog"
        )

    async def _take(self, message: Any) -> PurgatoryError | None:
        """One message from the server; returns the error that ends the stream, if any
        (the opening frame refused)."""
        if self.liveness.heartbeat(message):
            return None
        refused = self.liveness.refused(message)
        if refused is not None:
            return refused
        if message.HasField("ack"):
            waiting = self._acks.pop(message.ack.request_id, None)
            if waiting is not None and not waiting[0].done():
                waiting[0].set_result(ack_from_proto(message.ack, waiting[1]))
        for raw in message.outcomes:
            event = event_from_proto(raw)
            if self._on_outcome is None:
                await self._queue.put(event)
            else:
                handed = self._on_outcome(event)
                if handed is not None:  # a bounded consumer: wait for room
                    await handed
        if message.delivered_through:
            self.delivered = message.delivered_through
        return None

    def _finish(self, error: PurgatoryError | None) -> None:
        """The stream has ended: fail what is unanswered, mark the end of the outcomes."""
        self._opened.set()  # never leave a submitter waiting on a stream that ended
        self.error = error
        self._finished = True
        failure = self._ended_error()
        for future, _ in self._acks.values():
            if not future.done():
                future.set_exception(failure)
        self._acks.clear()
        # The end marker may not fit a full queue: make room (the reader is done).
        while self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(None)
