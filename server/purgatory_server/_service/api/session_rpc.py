"""The ``Session`` RPC: many operations per message on one bidirectional stream.

A session reads frames (watches, signals, force-completes on one purgatory), applies each
through the same :class:`NamedPurgatory` entry points as the unary and batch RPCs (so ids
stay idempotent and limits apply), acknowledges each frame in order, and sends every
watched operation's outcome as soon as it ends. Three concurrent parts:

- the *reader* applies frames one at a time; it stops reading (HTTP/2 flow control then
  holds the client back) while more than half the outbound bound waits to be sent;
- *acknowledgements* wait, in frame order, for the purgatory's durable barrier (durable
  purgatories only), so a frame is acknowledged only once its records are journaled;
- the *writer* sends what is queued, packing loose outcomes into messages of up to
  :data:`.session_messages.OUTCOMES_PER_MESSAGE`.

Ordering: an outcome is never sent before the acknowledgement of the frame that watched
its operation. An outcome that ends before that acknowledgement is sent (a *stash*) in
the acknowledgement's message. Each operation gets one outcome per stream, however often
it is re-sent on it.

Bounded memory: outcomes and acknowledgements waiting to be sent are capped by the
server's ``session_buffer`` limit. Past it the client is not reading; the stream ends with
RESOURCE_EXHAUSTED (capacity that frees up: re-open and re-send the watches still wanted;
those that ended answer at once from the finished-operation memory). Shutdown fails the
session's waiter, which ends the stream with UNAVAILABLE.

Thread safety: loop-confined, like the purgatories it calls. Outcomes reach the session
through a :class:`~.feed.Waiter` that the purgatory's feed calls on the loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.heartbeats import session_heartbeat
from purgatory_server._service.api.session_messages import ACK_BYTES, Ack, OpKey, pack, status_size
from purgatory_server._service.core.errors import (
    Code,
    LimitExceeded,
    ServiceError,
)
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.outcomes.event_log import Outcome
from purgatory_server._service.outcomes.feed import Feed, Waiter
from purgatory_server._service.wire.convert import add_status
from purgatory_server._service.wire.validation import (
    FieldPrefixes,
    check_batch,
    heartbeat_interval,
    operation_requests,
    required_id,
    signals_from_proto,
)

__all__ = [
    "METADATA_SESSION_BUFFER",
    "ClientGone",
    "RefusedFrame",
    "Send",
    "SessionFrames",
    "SessionOverflow",
    "SessionStream",
]

logger = logging.getLogger("purgatory_server.service")

# Trailing metadata of a session cut for not reading: the bound it went past.
METADATA_SESSION_BUFFER = "purgatory-session-buffer"


class ClientGone(Exception):
    """The client went away (reading a frame or writing a message failed); the edge
    raises it in place of its transport's own exceptions."""


# The frames as the edge hands them over: decoded, each authorized or refused.
SessionFrames = AsyncIterator["pb.SessionRequest | RefusedFrame"]
# Sends one message on the stream (raises ClientGone when the client is gone).
Send = Callable[[pb.SessionResponse], Awaitable[None]]


class SessionOverflow(LimitExceeded):
    """The client stopped reading and the session's outbound buffer is full."""

    def __init__(self, bound: int) -> None:
        super().__init__(
            f"session fell more than {bound} outcomes and acknowledgements behind "
            "(the client is not reading); re-open the session and re-send the watches "
            "still wanted"
        )
        self.bound = bound

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_SESSION_BUFFER, str(self.bound)),)


class RefusedFrame:
    """A frame the gRPC edge refused before the session saw it (e.g. PERMISSION_DENIED):
    the session acknowledges it with ``error`` and changes nothing."""

    __slots__ = ("error", "request_id")

    def __init__(self, request_id: int, error: ServiceError) -> None:
        self.request_id = request_id
        self.error = error


class _SessionWaiter(Waiter):
    """The one waiter a session attaches to every operation it watches."""

    __slots__ = ("_session",)

    def __init__(self, session: SessionStream) -> None:  # no future: outcomes go to the session
        self._session = session

    def deliver(self, outcome: Outcome) -> None:
        self._session.on_outcome(outcome)

    def fail(self, exc: BaseException) -> None:
        self._session.end(exc if isinstance(exc, ServiceError) else None)


class SessionStream:
    """One open Session stream (loop-confined; see the module docstring)."""

    def __init__(self, registry: PurgatoryRegistry, loop: asyncio.AbstractEventLoop) -> None:
        self._registry = registry
        self._loop = loop
        self._limits = registry.limits
        self._bound = max(1, self._limits.session_buffer)
        self._waiter = _SessionWaiter(self)
        self._watching: dict[OpKey, Feed] = {}  # watched operation -> its feed
        self._unacked: dict[OpKey, Ack] = {}
        self._acks: deque[Ack] = deque()  # waiting for their barrier, in frame order
        self._out: deque[Ack | Outcome] = deque()  # ready to send
        self._buffered = 0  # outcomes + acknowledgements queued, acked or not
        self._wake_writer = asyncio.Event()
        self._room = asyncio.Event()  # set while the reader may read
        self._room.set()
        self._input_done = False
        self._ended: asyncio.Future[ServiceError | None] = loop.create_future()
        # Seconds of silence after which the writer sends a heartbeat (None: never).
        self._heartbeat_s: float | None = None

    # ------------------------------------------------------------------ life cycle
    async def run(self, requests: SessionFrames, send: Send) -> None:
        """Serve the stream until the client is done and owed nothing, or raise the error
        that ended it (the edge turns it into the stream's status).

        On an error the reader stops, the waiters are detached and what was queued is
        dropped (so memory stops growing at once), but a message already being written
        is let finish: gRPC cannot send the status while a message send is pending. A
        client that never reads again therefore sees the status only when it reads (or
        never, if it goes away), exactly like a slow Subscribe stream.
        """
        reader = asyncio.ensure_future(self._read(requests))
        writer = asyncio.ensure_future(self._write(send))
        sessions = self._registry.sessions
        sessions.open.add(self)
        try:
            error = await self._ended
            reader.cancel()
            self._detach()
            self._out.clear()
            self._acks.clear()
            self._unacked.clear()
            self._wake_writer.set()
            await writer  # returns once its current write (if any) is done
        finally:
            for task in (reader, writer):
                task.cancel()
            for task in (reader, writer):
                with contextlib.suppress(BaseException):
                    await task
            self._detach()
            sessions.open.discard(self)
        if error is not None:
            raise error

    def end(self, error: ServiceError | None) -> None:
        if not self._ended.done():
            self._ended.set_result(error)

    def _detach(self) -> None:
        waiter = self._waiter
        for (_, op_id), feed in self._watching.items():
            feed.detach(op_id, waiter)
        self._watching.clear()

    def _maybe_finished(self) -> None:
        idle = not (self._watching or self._acks or self._out or self._buffered)
        if self._input_done and idle:
            self.end(None)

    # ------------------------------------------------------------------ reading
    async def _read(self, requests: SessionFrames) -> None:
        try:
            async for frame in requests:
                self._apply(frame)
                if self._buffered * 2 >= self._bound:
                    self._room.clear()
                    await self._room.wait()
        except ServiceError as exc:
            self.end(exc)
            return
        except ClientGone:
            self.end(None)
            return
        self._input_done = True
        self._maybe_finished()

    def _apply(self, frame: pb.SessionRequest | RefusedFrame) -> None:
        ack = Ack(frame.request_id)
        try:
            if isinstance(frame, RefusedFrame):
                raise frame.error
            if frame.heartbeat_interval_ms and self._set_heartbeat(frame):
                ack.ready = True  # a liveness-only frame: nothing else to apply
                self._queue_ack(ack)
                return
            purgatory = self._registry.get(frame.purgatory)
            self._apply_to(purgatory, frame, ack)
        except ServiceError as exc:
            if exc.code is Code.UNAVAILABLE:
                raise  # shutting down: the stream ends
            del ack.message.operations[:]
            del ack.message.completed_per_signal[:]
            del ack.message.force_completed[:]
            ack.message.code = int(exc.code)
            ack.message.message = exc.message
            ack.keys.clear()
            ack.stash.clear()
            ack.size = ACK_BYTES
            ack.ready = True
            self._queue_ack(ack)
            return
        barrier = purgatory.barrier
        if barrier is None:
            ack.ready = True
            self._queue_ack(ack)
        else:
            self._queue_ack(ack)
            self._after(barrier(), ack)

    def _set_heartbeat(self, frame: pb.SessionRequest) -> bool:
        """Take the frame's heartbeat interval; True if the frame carries nothing else."""
        interval = heartbeat_interval("heartbeat_interval_ms", frame.heartbeat_interval_ms)
        if interval != self._heartbeat_s:
            self._heartbeat_s = interval
            self._wake_writer.set()  # the writer re-arms its idle wait with the new interval
        return not (frame.watches or frame.signals or frame.force_complete)

    def _apply_to(self, purgatory: NamedPurgatory, frame: pb.SessionRequest, ack: Ack) -> None:
        """Validate everything, then register, signal and force-complete (all or nothing
        up to the first change: nothing after validation can fail but a shutdown)."""
        limits = self._limits
        watches, signals, forced = frame.watches, frame.signals, frame.force_complete
        size = len(watches) + len(signals) + len(forced)
        if size > limits.max_batch_size:
            check_batch("watches+signals+force_complete", size, limits)
        requests = operation_requests("watches", watches, limits) if watches else []
        records = signals_from_proto("signals", signals, limits) if signals else []
        if forced:
            watched = {r.operation_id for r in requests}
            for i, op_id in enumerate(forced):
                required_id(f"force_complete[{i}]", op_id, limits)
                if op_id not in watched:
                    purgatory.lookup(op_id)  # NOT_FOUND before anything changes
        msg = ack.message
        name = purgatory.name
        if requests:
            registered = purgatory.register(requests, FieldPrefixes("watches", len(requests)))
            add = msg.operations.add
            feed, waiter = purgatory.feed, self._waiter
            watching, unacked, keys = self._watching, self._unacked, ack.keys
            size = 0
            for target, created in registered:
                if isinstance(target, Outcome):
                    add_status(add, target, created)
                    size += status_size(target.payload, target.result.data)
                    ack.stash.append(target)
                    self._count(1)
                    continue
                op_id = target.operation_id
                add_status(add, target, created)
                size += status_size(target.definition.payload, b"")
                key = (name, op_id)
                if key not in watching:
                    feed.attach(op_id, waiter)
                    watching[key] = feed
                    keys.append(key)
                    unacked[key] = ack
            ack.size += size
        if records:
            msg.completed_per_signal.extend(purgatory.signal(records))
        for op_id in forced:
            won, _ = purgatory.force_complete(op_id)
            msg.force_completed.append(won)

    def _after(self, barrier: Awaitable[None], ack: Ack) -> None:
        future = asyncio.ensure_future(barrier)

        def done(f: asyncio.Future[None]) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            if exc is not None:
                logger.error("session: journal write failed: %s", exc)
                # A replicated purgatory's owner that lost it says so (UNAVAILABLE + owner).
                self.end(exc if isinstance(exc, ServiceError) else _JournalFailed())
                return
            ack.ready = True
            self._flush_acks()

        future.add_done_callback(done)

    # ------------------------------------------------------------------ outbound
    def _queue_ack(self, ack: Ack) -> None:
        self._acks.append(ack)
        self._count(1)
        self._flush_acks()

    def _flush_acks(self) -> None:
        acks = self._acks
        moved = False
        while acks and acks[0].ready:
            ack = acks.popleft()
            for key in ack.keys:
                if self._unacked.get(key) is ack:
                    del self._unacked[key]
            self._out.append(ack)
            moved = True
        if moved:
            self._wake_writer.set()

    def on_outcome(self, outcome: Outcome) -> None:
        key = (outcome.purgatory, outcome.operation_id)
        if self._watching.pop(key, None) is None:
            return
        ack = self._unacked.pop(key, None)
        if ack is not None:
            ack.stash.append(outcome)
        else:
            self._out.append(outcome)
            self._wake_writer.set()
        self._count(1)

    @property
    def buffered(self) -> int:
        """Outcomes and acknowledgements queued, acked or not (the metrics read it)."""
        return self._buffered

    def _count(self, n: int) -> None:
        self._buffered += n
        if self._buffered > self._bound and not self._ended.done():
            self._registry.sessions.cut_off += 1
            self.end(SessionOverflow(self._bound))

    async def _write(self, send: Send) -> None:
        ended = self._ended
        try:
            while not ended.done():
                if self._heartbeat_s is None:
                    await self._wake_writer.wait()
                else:
                    try:
                        await asyncio.wait_for(self._wake_writer.wait(), self._heartbeat_s)
                    except TimeoutError:  # idle that long: tell the client we are alive
                        if ended.done():
                            return
                        await send(session_heartbeat())
                        continue
                self._wake_writer.clear()
                for message in pack(self._out):
                    if ended.done():
                        return
                    await send(message)
                    sent = len(message.outcomes) + (1 if message.HasField("ack") else 0)
                    self._buffered -= sent
                    if self._buffered * 2 < self._bound:
                        self._room.set()
                self._maybe_finished()
        except ClientGone:
            self.end(None)


class _JournalFailed(ServiceError):
    code = Code.UNAVAILABLE

    def __init__(self) -> None:
        super().__init__("journal write failed; re-send the watches on a new session")
