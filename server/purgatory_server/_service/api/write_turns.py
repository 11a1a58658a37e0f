"""Stream writes per loop turn: a burst of many streams' writes never queues a small
request (or an expiry's delivery) behind all of it.

Every write a stream makes (a Subscribe event, its headers or closing status, a Session
message) is a few callbacks on the one event loop: the handler hands the message to
gRPC, gRPC's completion comes back. asyncio runs, in each turn, every callback that was
ready when the turn began, and one outcome offered to hundreds of Subscribe streams wakes
every handler in the same turn. Whatever arrives meanwhile (a long-poll, a signal) runs
only after the whole burst, and a watch + signal pair, which needs several turns, waits
for several bursts.

:class:`WriteTurns` lets about ``per_turn`` writes start in one turn; the rest wait,
first come first served, for the next turns, and the loop polls its sockets between
turns, so other requests get in after a few writes. A write that finds the turn with room
and nobody waiting never waits: a few streams are not slowed at all. A turn ends when the
loop runs the callback :meth:`WriteTurns.turn` schedules with ``call_soon`` (asyncio runs
callbacks scheduled during a turn in the next one, after polling for I/O); at most about
twice ``per_turn`` writes start in one turn (those released for it, and new ones arriving
after its counter was reset).

The same gate on bulk requests (at most N batch entries a turn) was tried for long-poll
lateness under the batch load and made it worse: a unary request needs several turns on
its way in, so more, shorter turns delay it more.

Thread-safety: loop-confined (the handlers run on the loop).
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["WRITES_PER_TURN", "WriteTurns"]

# Writes that may start in one loop turn: small enough that a probe's latency stays low
# behind hundreds of non-reading Subscribe streams, large enough that fan-out to reading
# streams costs little more CPU than without a limit (docs/benchmarks.md).
WRITES_PER_TURN = 4


class WriteTurns:
    """About ``per_turn`` stream writes start per loop turn (module docstring)."""

    __slots__ = ("_loop", "_per_turn", "_started", "_turn_ends", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, per_turn: int = WRITES_PER_TURN) -> None:
        self._loop = loop
        self._per_turn = per_turn
        self._started = 0  # writes started in this turn
        self._turn_ends = False  # the end-of-turn callback is scheduled
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def turn(self) -> None:
        """Return when this write may start: at once while the turn has room and nothing
        waits, else in a later turn (first come, first served)."""
        if not self._waiting and self._started < self._per_turn:
            self._started += 1
            self._end_turn_later()
            return
        waiter = self._loop.create_future()
        self._waiting.append(waiter)
        self._end_turn_later()
        await waiter  # (cancelled: _next_turn skips it)

    def _end_turn_later(self) -> None:
        if not self._turn_ends:
            self._turn_ends = True
            self._loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new turn: release the next waiters (their writes run in the turn after this
        callback's, once the loop has polled its sockets again)."""
        self._started = 0
        waiting = self._waiting
        while waiting and self._started < self._per_turn:
            waiter = waiting.popleft()
            if not waiter.done():  # (done: cancelled while it waited)
                waiter.set_result(None)
                self._started += 1
        self._turn_ends = False
        if waiting or self._started:
            self._end_turn_later()
