"""A Session stream's outbound half: what it owes, the queue of acknowledgements and
outcomes, the bound the reader waits on, and the writer (see :mod:`.session_rpc`).

:class:`SessionOutbound` is the base of :class:`~.session_rpc.SessionStream`: the stream
reads and applies frames; this half counts what they make the server hold and sends it.

Thread safety: loop-confined, like the stream.
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
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.model.errors import (
    ServiceError,
    SessionOverflow,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.feed import Feed, Waiter

__all__ = ["ClientGone", "Send", "SessionOutbound"]

# Written outcomes a named session keeps (ids) for a replay on resume, at most.
REPLAY_MAX = 1024
# Seconds the writer may wait on one message before the client is taken as not reading.
STALLED_S = 5.0


class ClientGone(Exception):
    """The client went away (reading a frame or writing a message failed); the edge
    raises it in place of its transport's own exceptions."""


# Sends one message on the stream (raises ClientGone when the client is gone).
Send = Callable[[pb.SessionResponse], Awaitable[None]]


class SessionOutbound:
    """Outbound state and the writer of one Session stream (loop-confined)."""

    def __init__(
        self,
        limits: Limits,
        loop: asyncio.AbstractEventLoop,
        on_cut: Callable[[], None] | None = None,
        budget: ServerBudget | None = None,
    ) -> None:
        self._limits = limits
        # What waits to be sent is charged to the server's memory budget (issue 22):
        # ``_charged`` of it, given back as it is written or when the stream ends.
        self._budget = budget
        self._charged = 0
        self._on_cut = on_cut  # counts a stream cut for not reading (the metrics)
        self._loop = loop
        self._bound = max(1, limits.session_buffer)
        self._bytes_bound = max(1, limits.session_buffer_bytes)
        self._watching: dict[OpKey, Feed] = {}  # watched operation -> its feed
        self._unacked: dict[OpKey, Ack] = {}
        self._acks: deque[Ack] = deque()  # waiting for their barrier, in frame order
        self._out: deque[Ack | Outcome] = deque()  # ready to send
        self._buffered = 0  # outcomes + acknowledgements queued, acked or not
        self._queued_bytes = 0  # their estimated bytes
        self._watch_bytes = 0  # estimated bytes of the watched operations' outcomes
        # Resuming: the session's name, the number of the last outcome written, and the
        # last outcomes written (for a replay; only for a named session).
        self.session_id = ""
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

    def end(self, error: ServiceError | None) -> None:
        if not self._ended.done():
            self._ended.set_result(error)
            # What is queued is dropped now (SessionStream.run): give its charge back.
            self._uncharge(self._charged)

    def _uncharge(self, size: int) -> None:
        give = min(size, self._charged)
        if give and self._budget is not None:
            self._charged -= give
            self._budget.release(give)

    def _detach(self, waiter: Waiter) -> None:
        """The stream is over: detach ``waiter`` from every feed it watches, and give back
        the budget charge of what is still queued (dropped, or parked as ids), whether
        the stream ended or its handler was cancelled (the client went away)."""
        for (_, op_id), feed in self._watching.items():
            feed.detach(op_id, waiter)
        self._watching.clear()
        self._uncharge(self._charged)

    def _maybe_finished(self) -> None:
        idle = not (self._watching or self._acks or self._out or self._buffered)
        if self._input_done and idle:
            self._clean = True
            self.end(None)

    # ------------------------------------------------------------------ outbound
    def _queue_ack(self, ack: Ack) -> None:
        self._acks.append(ack)
        self._count(1, ack.size)
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
        for :data:`STALLED_S` (the client reads nothing): the reader stopped at the
        bound, so only outcomes of operations watched before get there, and a client
        that reads them (a burst, a resume) is served, not cut."""
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

    @property
    def buffered(self) -> int:
        """Outcomes and acknowledgements queued, acked or not (the metrics read it)."""
        return self._buffered

    def _stalled(self) -> bool:
        """Whether the writer has been stuck on one message for :data:`STALLED_S`."""
        since = self._progress_at
        return since is not None and self._loop.time() - since >= STALLED_S

    def _full(self) -> bool:
        """Whether the reader must wait: what waits to be sent reaches ``session_buffer``
        messages, or with the outcomes still owed (estimated) ``session_buffer_bytes``."""
        if self._buffered >= self._bound:
            return True
        return self._queued_bytes + self._watch_bytes >= self._bytes_bound

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
                if ended.done():
                    return  # (what is queued stays queued: a named session parks it)
                sizes: list[int] = []
                unsent = self._unsent = deque(pack(self._out, sizes))
                self._progress_at = self._loop.time()
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
                    if not self._full():
                        self._room.set()
                self._progress_at = None  # (all written: idle, not stalled)
                self._maybe_finished()
        except ClientGone:
            self.end(None)

    def _number(self, message: pb.SessionResponse, count: int) -> None:
        """Number the message's outcomes (``delivered_through``); a named session logs
        them for a replay after a resume."""
        first = self._delivered + 1
        self._delivered += count
        message.delivered_through = self._delivered
        if self.session_id:
            sent = self._sent
            for n, event in enumerate(message.outcomes, first):
                sent.append((n, (event.purgatory, event.operation_id)))
