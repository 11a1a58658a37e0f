"""A Session stream's outbound half: what it owes, the queue of acknowledgements and
outcomes, the bound the reader waits on, the writer, and the replay memory of a named
session (see :mod:`.session_rpc`).

The stream reads and applies frames and drives this half through its methods; only
:class:`SessionOutbound` writes its own fields.

Thread safety: loop-confined, like the stream; the feeds call its waiter on the loop
thread.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.session_messages import (
    Ack,
    OpKey,
    outcome_size,
    pack,
    session_heartbeat,
    watch_size,
)
from purgatory_server._service.api.session_resume import Parked
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.operation_table import Target
from purgatory_server._service.model.errors import (
    ServiceError,
    SessionOverBudget,
    SessionOverflow,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.feed import Waiter

__all__ = ["ClientGone", "Send", "SessionOutbound"]

# Written outcomes a named session keeps (ids) for a replay on resume, at most.
REPLAY_MAX = 1024
# Seconds the writer may wait on one message before the client is taken as not reading.
STALLED_S = 5.0
# The share of the budget's held pool at which it counts as full for a Session holding
# what it owes (7/8): it is paused, and cut once stalled.
POOL_FULL = (7, 8)


class ClientGone(Exception):
    """The client went away (reading a frame or writing a message failed); the edge
    raises it in place of its transport's own exceptions."""


# Sends one message on the stream (raises ClientGone when the client is gone).
Send = Callable[[pb.SessionResponse], Awaitable[None]]


class _OutboundWaiter(Waiter):
    """The one waiter a session attaches to every operation it watches."""

    __slots__ = ("_outbound",)

    def __init__(self, outbound: SessionOutbound) -> None:  # no future: outcomes go to it
        self._outbound = outbound

    def deliver(self, outcome: Outcome) -> None:
        self._outbound.on_outcome(outcome)

    def fail(self, exc: BaseException) -> None:
        self._outbound.end(exc if isinstance(exc, ServiceError) else None)


class SessionOutbound:
    """What one Session stream owes, and the writer that sends it.

    Invariants: an outcome is never queued before the acknowledgement of the frame that
    watched its operation (it waits in that ack's stash); each operation is owed once per
    stream; ``buffered`` and the queued bytes count what is queued or packed and not yet
    written, and those bytes stay charged to the server budget until written or the
    stream ends. Loop-confined.
    """

    __slots__ = (
        "_acks",
        "_bound",
        "_budget",
        "_buffered",
        "_bytes_bound",
        "_charged",
        "_clean",
        "_delivered",
        "_ended",
        "_heartbeat_s",
        "_input_done",
        "_loop",
        "_on_cut",
        "_out",
        "_progress_at",
        "_queued_bytes",
        "_room",
        "_sent",
        "_session_id",
        "_stall_timer",
        "_unacked",
        "_unsent",
        "_waiter",
        "_wake_writer",
        "_watch_bytes",
        "_watching",
    )

    def __init__(
        self,
        limits: Limits,
        loop: asyncio.AbstractEventLoop,
        on_cut: Callable[[], None] | None = None,
        budget: ServerBudget | None = None,
    ) -> None:
        # What waits to be sent is charged to the server's memory budget (``_charged``),
        # given back as it is written or when the stream ends.
        self._budget = budget
        self._charged = 0
        self._on_cut = on_cut  # counts a stream cut for not reading (the metrics)
        self._loop = loop
        self._bound = max(1, limits.session_buffer)
        self._bytes_bound = max(1, limits.session_buffer_bytes)
        self._waiter = _OutboundWaiter(self)
        self._watching: dict[OpKey, NamedPurgatory] = {}  # watched operation -> its purgatory
        self._unacked: dict[OpKey, Ack] = {}
        self._acks: deque[Ack] = deque()  # waiting for their barrier, in frame order
        self._out: deque[Ack | Outcome] = deque()  # ready to send
        self._buffered = 0  # outcomes + acknowledgements queued, acked or not
        self._queued_bytes = 0  # their estimated bytes
        self._watch_bytes = 0  # estimated bytes of the watched operations' outcomes
        # Resuming: the session's name, the number of the last outcome written, and the
        # last outcomes written (for a replay; only for a named session).
        self._session_id = ""
        self._delivered = 0
        self._sent: deque[tuple[int, OpKey]] = deque(maxlen=min(self._bound, REPLAY_MAX))
        self._clean = False  # ended because the client was done and owed nothing
        self._wake_writer = asyncio.Event()
        self._room = asyncio.Event()  # set while the reader may read
        self._room.set()
        self._input_done = False
        self._ended: asyncio.Future[ServiceError | None] = loop.create_future()
        # Seconds of silence after which the writer sends a heartbeat (None: never).
        self._heartbeat_s: float | None = None
        # Messages packed but not yet written (their outcomes are still owed).
        self._unsent: deque[pb.SessionResponse] = deque()
        # While the writer writes: when it last finished a message (None while idle).
        self._progress_at: float | None = None
        # While the writer writes: the check that cuts it once stuck past the budget.
        self._stall_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ reading state
    @property
    def buffered(self) -> int:
        """Outcomes and acknowledgements queued, acked or not (the metrics read it)."""
        return self._buffered

    @property
    def ended(self) -> Awaitable[ServiceError | None]:
        """Resolves once the stream ends: None if the client was done (or went away),
        else the error that ended it."""
        return self._ended

    @property
    def session_id(self) -> str:
        """The session's name ("" until a frame names it)."""
        return self._session_id

    @property
    def delivered(self) -> int:
        """The number of the last outcome written (numbers go on across a resume)."""
        return self._delivered

    # ------------------------------------------------------------------ life cycle
    def end(self, error: ServiceError | None) -> None:
        """End the stream (the first call wins) and give back the budget charge."""
        if not self._ended.done():
            self._ended.set_result(error)
            # What is queued is dropped now (the stream calls drop): give its charge back.
            self._uncharge(self._charged)

    def finish_input(self) -> None:
        """The client sent its last frame: the stream ends once nothing is owed."""
        self._input_done = True
        self._maybe_finished()

    def detach(self) -> None:
        """The stream is over: detach the waiter from every feed it watches, and give back
        the budget charge of what is still queued (dropped, or parked as ids), whether
        the stream ended or its handler was cancelled (the client went away)."""
        for (_, op_id), purgatory in self._watching.items():
            purgatory.detach(op_id, self._waiter)
        self._watching.clear()
        self._uncharge(self._charged)

    def drop(self) -> None:
        """The stream ended: :meth:`detach`, drop what is queued (memory stops growing at
        once) and wake the writer so it returns after its current write."""
        self.detach()
        self._out.clear()
        self._acks.clear()
        self._unacked.clear()
        self._wake_writer.set()

    def _uncharge(self, size: int) -> None:
        give = min(size, self._charged)
        if give and self._budget is not None:
            self._charged -= give
            self._budget.release(give)

    def _maybe_finished(self) -> None:
        idle = not (self._watching or self._acks or self._out or self._buffered)
        if self._input_done and idle:
            self._clean = True
            self.end(None)

    # ------------------------------------------------------------------ naming, resuming
    def name(self, session_id: str) -> None:
        """Take the session's name (once; the stream checks it): written outcomes are
        logged for a replay from now on."""
        self._session_id = session_id

    def resume(self, delivered: int) -> None:
        """Go on numbering outcomes after ``delivered`` (a resume, before any outcome was
        written on this stream)."""
        self._delivered = delivered

    def parked(self) -> Parked | None:
        """What this named stream still owes (before its queues are dropped): the watches
        not ended, the outcomes not yet written (packed, queued, stashed for an ack).
        None for an unnamed stream or one that ended owing nothing."""
        if not self._session_id or self._clean:
            return None
        owed = [(e.purgatory, e.operation_id) for m in self._unsent for e in m.outcomes]
        for item in (*self._out, *self._acks):
            for outcome in item.stash if isinstance(item, Ack) else (item,):
                owed.append((outcome.purgatory, outcome.operation_id))
        return Parked(self._delivered, [], owed, list(self._watching))

    def replay(self) -> tuple[int, list[tuple[int, OpKey]]]:
        """The number of the last outcome written and the numbered ids kept for a replay
        (a copy, taken once the writer is done)."""
        return self._delivered, list(self._sent)

    # ------------------------------------------------------------------ owing
    def track(self, purgatory: NamedPurgatory, target: Target, ack: Ack) -> None:
        """Owe ``target``'s outcome: at once (on ``ack``'s message) if it has ended,
        else when it ends (attached, once per stream)."""
        if isinstance(target, Outcome):
            ack.stash.append(target)
            self._count(1, outcome_size(target))
            return
        key = (purgatory.name, target.operation_id)
        if key not in self._watching:
            purgatory.attach(target.operation_id, self._waiter)
            self._watching[key] = purgatory
            self._watch_bytes += watch_size(target.definition.payload, target.keys)
            ack.keys.append(key)
            self._unacked[key] = ack

    def queue_ack(self, ack: Ack) -> None:
        """Queue a frame's acknowledgement (in frame order); it is sent once it and every
        earlier one are ``ready``."""
        self._acks.append(ack)
        self._count(1, ack.size)
        self.flush_acks()

    def flush_acks(self) -> None:
        """Move the ready acknowledgements at the head of the queue to the writer."""
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
        """A watched operation ended: queue its outcome (stashed on its frame's ack while
        that is not sent)."""
        key = (outcome.purgatory, outcome.operation_id)
        if self._watching.pop(key, None) is None:
            return
        self._watch_bytes -= watch_size(outcome.payload, outcome.keys)
        ack = self._unacked.pop(key, None)
        if ack is not None:
            ack.stash.append(outcome)
        else:
            self._out.append(outcome)
            self._wake_writer.set()
        self._count(1, outcome_size(outcome))

    def _count(self, n: int, size: int) -> None:
        """``n`` messages of about ``size`` bytes queued. The stream is cut only if more
        than twice the byte bound waits *and* the writer has been stuck on one message
        for :data:`STALLED_S`: a client that reads a burst is served, not cut."""
        self._buffered += n
        self._queued_bytes += size
        if self._budget is not None and not self._ended.done():
            self._budget.charge_owed(size)
            self._charged += size
        hard = 2 * self._bytes_bound
        if self._queued_bytes > hard and self._stalled() and not self._ended.done():
            if self._on_cut is not None:
                self._on_cut()
            self.end(SessionOverflow(hard, STALLED_S))
        else:
            self._cut_over_budget()

    def _over_budget(self) -> bool:
        """Whether the stream holds a charge while the budget's held pool is full: at
        least :data:`POOL_FULL` of it (registrations are refused short of the brim, by
        as much as one batch, so the brim itself is never reached)."""
        budget = self._budget
        if budget is None or self._charged <= 0:
            return False
        return budget.held * POOL_FULL[1] >= budget.held_capacity * POOL_FULL[0]

    def _cut_over_budget(self) -> None:
        """End the stream (RESOURCE_EXHAUSTED) if it holds a charge while the held pool is
        full and its writer has been stuck on one message for :data:`STALLED_S`: the same
        rule as a Subscribe stream's, so one non-reader cannot keep the pool full (and
        every other Session paused) for ever."""
        if self._over_budget() and self._stalled() and not self._ended.done():
            if self._on_cut is not None:
                self._on_cut()
            self.end(SessionOverBudget(self._charged, STALLED_S))

    def _stalled(self) -> bool:
        """Whether the writer has been stuck on one message for :data:`STALLED_S`."""
        since = self._progress_at
        return since is not None and self._loop.time() - since >= STALLED_S

    # ------------------------------------------------------------------ the bound
    def full(self) -> bool:
        """Whether the reader must wait: what waits to be sent reaches ``session_buffer``
        messages, or with the outcomes still owed (estimated) ``session_buffer_bytes``, or
        the stream holds a charge while the budget's held pool is full (what it owes is
        never refused, so a client past the budget is paused: its frames wait until the
        writer has sent what it owes, or the stream is cut, :meth:`_cut_over_budget`)."""
        if self._buffered >= self._bound:
            return True
        if self._queued_bytes + self._watch_bytes >= self._bytes_bound:
            return True
        return self._over_budget()

    async def wait_room(self) -> None:
        """Wait (call only when :meth:`full`) until the writer has made room, or the
        stream ended (cut: past the budget and stalled, see :meth:`_cut_over_budget`)."""
        room = self._room
        ended = self._ended
        while self.full() and not ended.done():
            room.clear()
            try:
                await asyncio.wait_for(room.wait(), STALLED_S)
            except TimeoutError:
                self._cut_over_budget()

    # ------------------------------------------------------------------ writing
    def heartbeat(self, interval_s: float | None) -> None:
        """Send a heartbeat after ``interval_s`` of silence (None: never)."""
        if interval_s != self._heartbeat_s:
            self._heartbeat_s = interval_s
            self._wake_writer.set()  # the writer re-arms its idle wait with the new interval

    async def write(self, send: Send) -> None:
        """The writer: send what is queued, packed, until the stream ends (one task)."""
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
                if ended.done():
                    return  # (what is queued stays queued: a named session parks it)
                sizes: list[int] = []
                unsent = self._unsent = deque(pack(self._out, sizes))
                self._progress_at = self._loop.time()
                self._stall_timer = self._loop.call_later(STALLED_S, self._stall_check)
                for size in sizes:
                    if ended.done():
                        return
                    message = unsent.popleft()
                    outcomes = len(message.outcomes)
                    if outcomes:
                        self._number(message, outcomes)
                    await send(message)
                    self._progress_at = self._loop.time()
                    self._buffered -= outcomes + (1 if message.HasField("ack") else 0)
                    self._queued_bytes -= size
                    self._uncharge(size)
                    if not self.full():
                        self._room.set()
                self._progress_at = None  # (all written: idle, not stalled)
                self._stop_stall_check()
                self._maybe_finished()
        except ClientGone:
            self.end(None)
        finally:
            self._stop_stall_check()

    def _stall_check(self) -> None:
        """While a write round lasts: cut the stream once it is stuck past the budget
        (:meth:`_cut_over_budget`), whether or not anything new is queued meanwhile."""
        self._stall_timer = None
        since = self._progress_at
        if since is None or self._ended.done():
            return
        self._cut_over_budget()
        if not self._ended.done():
            wait = max(0.05, STALLED_S - (self._loop.time() - since))
            self._stall_timer = self._loop.call_later(wait, self._stall_check)

    def _stop_stall_check(self) -> None:
        timer = self._stall_timer
        if timer is not None:
            self._stall_timer = None
            timer.cancel()

    def _number(self, message: pb.SessionResponse, count: int) -> None:
        """Number the message's outcomes (``delivered_through``); a named session logs
        them for a replay after a resume."""
        first = self._delivered + 1
        self._delivered += count
        message.delivered_through = self._delivered
        if self._session_id:
            sent = self._sent
            for n, event in enumerate(message.outcomes, first):
                sent.append((n, (event.purgatory, event.operation_id)))
