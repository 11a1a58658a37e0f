"""The ``Session`` RPC: many operations per message on one bidirectional stream.

A session reads frames (watches, signals, force-completes on one purgatory), applies each
through the same :class:`NamedPurgatory` entry points as the unary and batch RPCs (so ids
stay idempotent and limits apply), acknowledges each frame in order, and sends every
watched operation's outcome as soon as it ends. Three concurrent parts:

- the *reader* applies frames one at a time; it stops reading (HTTP/2 flow control then
  holds the client back) while what waits to be sent reaches ``session_buffer``
  messages, or with the outcomes its open watches will bring ``session_buffer_bytes``;
- *acknowledgements* wait, in frame order, for the purgatory's durable barrier (durable
  purgatories only), so a frame is acknowledged only once its records are journaled;
- the *writer* sends what is queued, packed into messages; it, the queues and the
  bound live in the stream's :class:`~.session_outbound.SessionOutbound`.

Ordering: an outcome is never sent before the acknowledgement of the frame that watched
its operation. An outcome that ends before that acknowledgement is sent (a *stash*) in
the acknowledgement's message. Each operation gets one outcome per stream, however often
it is re-sent on it.

Bounded memory: past the bound the reader waits; only outcomes of operations watched
before can still arrive, and they are written as the client reads. Past twice
``session_buffer_bytes`` with the writer stuck (a client that stopped reading) the stream
ends with RESOURCE_EXHAUSTED and its buffer is dropped at once (a named session parks what
it owes). Shutdown ends the stream with UNAVAILABLE.

Resuming: outcomes are numbered as written; a named stream parks what it owes when it
ends (:mod:`.session_resume`), and ``resume_after`` takes that over on a new stream.

Thread safety: loop-confined, like the purgatories it calls; outcomes come through the
outbound half's :class:`~.feed.Waiter`, which the purgatory's feed calls on the loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import check_writable
from purgatory_server._service.api.session_messages import (
    ACK_BYTES,
    Ack,
    status_size,
)
from purgatory_server._service.api.session_outbound import (
    ClientGone,
    Send,
    SessionOutbound,
)
from purgatory_server._service.api.session_resume import Parked, SessionDirectory
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.operation_table import Target
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.model.errors import (
    Code,
    InvalidArgument,
    OutOfRange,
    ServiceError,
    SessionEnded,
    SessionJournalFailed,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import add_status
from purgatory_server._service.wire.validation import (
    FieldPrefixes,
    check_batch,
    heartbeat_interval,
    operation_requests,
    required_id,
    signals_from_proto,
)

__all__ = ["ClientGone", "RefusedFrame", "Send", "SessionFrames", "SessionStream"]

logger = logging.getLogger("purgatory_server.service")

# The frames as the edge hands them over: decoded, each authorized or refused.
SessionFrames = AsyncIterator["pb.SessionRequest | RefusedFrame"]


class RefusedFrame:
    """A frame the gRPC edge refused before the session saw it (e.g. PERMISSION_DENIED):
    the session acknowledges it with ``error`` and changes nothing."""

    __slots__ = ("error", "request_id")

    def __init__(self, request_id: int, error: ServiceError) -> None:
        self.request_id = request_id
        self.error = error


class SessionStream:
    """One open Session stream: the reader, and the :class:`SessionOutbound` it drives
    (loop-confined; see the module docstring)."""

    __slots__ = ("_directory", "_limits", "_outbound", "_registry")

    def __init__(
        self,
        registry: PurgatoryRegistry,
        loop: asyncio.AbstractEventLoop,
        directory: SessionDirectory | None = None,
    ) -> None:
        self._registry = registry
        self._limits = registry.limits
        self._directory = directory
        self._outbound = SessionOutbound(
            registry.limits, loop, registry.sessions.count_cut, registry.budget
        )

    @property
    def buffered(self) -> int:
        """Outcomes and acknowledgements queued, acked or not (the metrics read it)."""
        return self._outbound.buffered

    @property
    def session_id(self) -> str:
        """The session's name ("" until a frame names it)."""
        return self._outbound.session_id

    # ------------------------------------------------------------------ life cycle
    async def run(self, requests: SessionFrames, send: Send) -> None:
        """Serve the stream until the client is done and owed nothing, or raise the error
        that ended it (the edge turns it into the stream's status).

        On an error the reader stops, the waiters are detached and what was queued is
        dropped, but a message already being written is let finish: gRPC cannot send the
        status while a send is pending.
        """
        outbound = self._outbound
        reader = asyncio.ensure_future(self._read(requests))
        writer = asyncio.ensure_future(outbound.write(send))
        sessions = self._registry.sessions
        sessions.open.add(self)
        parked: Parked | None = None
        try:
            error = await outbound.ended
            reader.cancel()
            parked = outbound.parked()
            outbound.drop()
            await writer  # returns once its current write (if any) is done
        finally:
            for task in (reader, writer):
                task.cancel()
            for task in (reader, writer):
                with contextlib.suppress(BaseException):
                    await task
            parked = parked or outbound.parked()  # (cancelled: the client went away)
            outbound.detach()
            sessions.open.discard(self)
            session_id = outbound.session_id
            if session_id and self._directory is not None:
                self._directory.release(session_id)
                if parked is not None:  # (numbers written while the writer finished)
                    parked.delivered, parked.sent = outbound.replay()
                    self._directory.park(session_id, parked)
        if error is not None:
            raise SessionEnded(error, outbound.delivered)

    # ------------------------------------------------------------------ reading
    async def _read(self, requests: SessionFrames) -> None:
        outbound = self._outbound
        try:
            async for frame in requests:
                self._apply(frame)
                if outbound.full():
                    await outbound.wait_room()
        except ServiceError as exc:
            outbound.end(exc)
            return
        except ClientGone:
            outbound.end(None)
            return
        outbound.finish_input()

    def _apply(self, frame: pb.SessionRequest | RefusedFrame) -> None:
        ack = Ack(frame.request_id)
        try:
            if isinstance(frame, RefusedFrame):
                raise frame.error
            if frame.session_id or frame.HasField("resume_after"):
                self._name(frame, ack)
                if not (frame.watches or frame.signals or frame.force_complete):
                    if frame.heartbeat_interval_ms:
                        self._set_heartbeat(frame)
                    ack.ready = True
                    self._outbound.queue_ack(ack)
                    return
            if frame.heartbeat_interval_ms and self._set_heartbeat(frame):
                ack.ready = True  # a liveness-only frame: nothing else to apply
                self._outbound.queue_ack(ack)
                return
            purgatory = self._registry.get(frame.purgatory)
            check_writable(purgatory)  # out of space: the frame is refused, the stream goes on
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
            self._outbound.queue_ack(ack)
            return
        barrier = purgatory.barrier
        if barrier is None:
            ack.ready = True
            self._outbound.queue_ack(ack)
        else:
            self._outbound.queue_ack(ack)
            self._after(barrier(), ack)

    def _set_heartbeat(self, frame: pb.SessionRequest) -> bool:
        """Take the frame's heartbeat interval; True if the frame carries nothing else."""
        interval = heartbeat_interval("heartbeat_interval_ms", frame.heartbeat_interval_ms)
        self._outbound.heartbeat(interval)
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
        if requests:
            registered = purgatory.register(requests, FieldPrefixes("watches", len(requests)))
            add = msg.operations.add
            track = self._outbound.track
            size = 0
            for target, created in registered:
                add_status(add, target, created)  # no payload: the client sent it
                size += status_size(target.result.data if isinstance(target, Outcome) else b"")
                track(purgatory, target, ack)
            ack.size += size
        if records:
            msg.completed_per_signal.extend(purgatory.signal(records))
        for op_id in forced:
            won, _ = purgatory.force_complete(op_id)
            msg.force_completed.append(won)

    # ------------------------------------------------------------------ resuming
    def _name(self, frame: pb.SessionRequest, ack: Ack) -> None:
        """Take the frame's ``session_id`` and, with ``resume_after``, the parked state of
        that session (all or nothing: nothing changes unless every outcome it owes is
        still known)."""
        outbound = self._outbound
        session_id, resume = frame.session_id, frame.HasField("resume_after")
        if resume and not session_id:
            raise InvalidArgument("session_id", "required with resume_after")
        if outbound.session_id:
            if session_id != outbound.session_id:
                raise InvalidArgument("session_id", "differs from the one this stream took")
            if resume:
                raise InvalidArgument("resume_after", "only on the frame that names the session")
            return
        directory = self._directory
        if directory is None:
            raise InvalidArgument("session_id", "sessions are not kept here")
        if resume and outbound.delivered:  # (its numbering would restart)
            raise InvalidArgument("resume_after", "only before the stream sent an outcome")
        directory.name(session_id, "session_id")
        try:
            if resume:
                parked = directory.take(session_id)
                try:
                    targets = self._owed(parked, frame.resume_after)
                except ServiceError:
                    directory.park(session_id, parked)  # kept for a better resume point
                    raise
                outbound.resume(parked.delivered)
                for purgatory, target in targets:
                    outbound.track(purgatory, target, ack)
        except ServiceError:
            directory.release(session_id)
            raise
        outbound.name(session_id)

    def _owed(self, parked: Parked, after: int) -> list[tuple[NamedPurgatory, Target]]:
        """What a resume after outcome number ``after`` sends: the outcomes written after
        it, those never written, and the watches still open (each once)."""
        oldest = parked.sent[0][0] if parked.sent else parked.delivered + 1
        if after > parked.delivered or after < oldest - 1:
            raise OutOfRange(
                f"resume_after: {after} is outside the outcomes this session kept for a "
                f"replay ({oldest - 1} to {parked.delivered}); re-send the watches",
                oldest,
            )
        replay = [key for n, key in parked.sent if n > after]
        found = []
        for name, op_id in dict.fromkeys([*replay, *parked.owed, *parked.watching]):
            purgatory = self._registry.get(name)
            found.append((purgatory, purgatory.lookup(op_id)))  # NOT_FOUND: forgotten
        return found

    def _after(self, barrier: Awaitable[None], ack: Ack) -> None:
        """Mark ``ack`` ready once ``barrier`` passes; a failed barrier ends the stream."""
        outbound = self._outbound
        future = asyncio.ensure_future(barrier)

        def done(f: asyncio.Future[None]) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            if exc is not None:
                logger.error("session: journal write failed: %s", exc)
                # A replicated purgatory's owner that lost it says so (UNAVAILABLE + owner).
                outbound.end(exc if isinstance(exc, ServiceError) else SessionJournalFailed())
                return
            ack.ready = True
            outbound.flush_acks()

        future.add_done_callback(done)
