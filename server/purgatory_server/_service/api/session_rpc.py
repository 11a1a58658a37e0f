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
- the *writer* (:mod:`.session_outbound`) sends what is queued, packed into messages.

Ordering: an outcome is never sent before the acknowledgement of the frame that watched
its operation. An outcome that ends before that acknowledgement is sent (a *stash*) in
the acknowledgement's message. Each operation gets one outcome per stream, however often
it is re-sent on it.

Bounded memory: past the bound the client adds nothing (the reader waits); only the
outcomes of operations watched before can still arrive. A burst of them is written as
the client reads, never cut for its count: they are operations the server already held.
Past twice ``session_buffer_bytes`` with the writer stuck for 5 s (a client that stopped
reading) the stream ends with RESOURCE_EXHAUSTED and its buffer is dropped at once (a
named session parks what it owes). Shutdown ends the stream with UNAVAILABLE.

Resuming: outcomes are numbered as written; a named stream parks what it owes when it
ends (:mod:`.session_resume`), and ``resume_after`` takes that over on a new stream.

Thread safety: loop-confined, like the purgatories it calls; outcomes come through a
:class:`~.feed.Waiter` the purgatory's feed calls on the loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.session_messages import (
    ACK_BYTES,
    Ack,
    outcome_size,
    status_size,
    watch_size,
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
from purgatory_server._service.outcomes.feed import Waiter
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


class _SessionWaiter(Waiter):
    """The one waiter a session attaches to every operation it watches."""

    __slots__ = ("_session",)

    def __init__(self, session: SessionStream) -> None:  # no future: outcomes go to the session
        self._session = session

    def deliver(self, outcome: Outcome) -> None:
        self._session.on_outcome(outcome)

    def fail(self, exc: BaseException) -> None:
        self._session.end(exc if isinstance(exc, ServiceError) else None)


class SessionStream(SessionOutbound):
    """One open Session stream (loop-confined; see the module docstring)."""

    def __init__(
        self,
        registry: PurgatoryRegistry,
        loop: asyncio.AbstractEventLoop,
        directory: SessionDirectory | None = None,
    ) -> None:
        super().__init__(registry.limits, loop, registry.sessions.count_cut, registry.budget)
        self._registry = registry
        self._directory = directory
        self._waiter = _SessionWaiter(self)

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
        parked: Parked | None = None
        try:
            error = await self._ended
            reader.cancel()
            parked = self._parked()
            self._detach(self._waiter)
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
            parked = parked or self._parked()  # (cancelled: the client went away)
            self._detach(self._waiter)
            sessions.open.discard(self)
            if self.session_id and self._directory is not None:
                self._directory.release(self.session_id)
                if parked is not None:  # (numbers written while the writer finished)
                    parked.delivered, parked.sent = self._delivered, list(self._sent)
                    self._directory.park(self.session_id, parked)
        if error is not None:
            raise SessionEnded(error, self._delivered)

    def _parked(self) -> Parked | None:
        """What this named stream still owes (before its queues are dropped): the watches
        not ended, the outcomes not yet written (packed, queued, stashed for an ack)."""
        if not self.session_id or self._clean:
            return None
        owed = [(e.purgatory, e.operation_id) for m in self._unsent for e in m.outcomes]
        for item in (*self._out, *self._acks):
            for outcome in item.stash if isinstance(item, Ack) else (item,):
                owed.append((outcome.purgatory, outcome.operation_id))
        return Parked(self._delivered, [], owed, list(self._watching))

    # ------------------------------------------------------------------ reading
    async def _read(self, requests: SessionFrames) -> None:
        try:
            async for frame in requests:
                self._apply(frame)
                if self._full():
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
            if frame.session_id or frame.HasField("resume_after"):
                self._name(frame, ack)
                if not (frame.watches or frame.signals or frame.force_complete):
                    if frame.heartbeat_interval_ms:
                        self._set_heartbeat(frame)
                    ack.ready = True
                    self._queue_ack(ack)
                    return
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
        if requests:
            registered = purgatory.register(requests, FieldPrefixes("watches", len(requests)))
            add = msg.operations.add
            track = self._track
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

    def _track(self, purgatory: NamedPurgatory, target: Target, ack: Ack) -> None:
        """Owe ``target``'s outcome: at once (on ``ack``'s message) if it has ended,
        else when it ends (attached, once per stream)."""
        if isinstance(target, Outcome):
            ack.stash.append(target)
            self._count(1, outcome_size(target))
            return
        key = (purgatory.name, target.operation_id)
        if key not in self._watching:
            purgatory.feed.attach(target.operation_id, self._waiter)
            self._watching[key] = purgatory.feed
            self._watch_bytes += watch_size(target.definition.payload, target.keys)
            ack.keys.append(key)
            self._unacked[key] = ack

    # ------------------------------------------------------------------ resuming
    def _name(self, frame: pb.SessionRequest, ack: Ack) -> None:
        """Take the frame's ``session_id`` and, with ``resume_after``, the parked state of
        that session (all or nothing: nothing changes unless every outcome it owes is
        still known)."""
        session_id, resume = frame.session_id, frame.HasField("resume_after")
        if resume and not session_id:
            raise InvalidArgument("session_id", "required with resume_after")
        if self.session_id:
            if session_id != self.session_id:
                raise InvalidArgument("session_id", "differs from the one this stream took")
            if resume:
                raise InvalidArgument("resume_after", "only on the frame that names the session")
            return
        directory = self._directory
        if directory is None:
            raise InvalidArgument("session_id", "sessions are not kept here")
        if resume and self._delivered:  # (its numbering would restart)
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
                self._delivered = parked.delivered
                for purgatory, target in targets:
                    self._track(purgatory, target, ack)
        except ServiceError:
            directory.release(session_id)
            raise
        self.session_id = session_id

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
        future = asyncio.ensure_future(barrier)

        def done(f: asyncio.Future[None]) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            if exc is not None:
                logger.error("session: journal write failed: %s", exc)
                # A replicated purgatory's owner that lost it says so (UNAVAILABLE + owner).
                self.end(exc if isinstance(exc, ServiceError) else SessionJournalFailed())
                return
            ack.ready = True
            self._flush_acks()

        future.add_done_callback(done)
