"""Stream writes per loop turn: a burst of many streams' writes never queues a small
request (or an expiry's delivery) behind all of it.

asyncio runs, in each turn, every callback ready when the turn began, so one outcome
offered to many Subscribe streams would run all their writes before anything that
arrived meanwhile. :class:`WriteTurns` lets about ``per_turn`` writes start in one turn;
the rest wait, first come first served, for later turns, and the loop polls its sockets
between turns. A write that finds room and nobody waiting never waits. At most about
twice ``per_turn`` writes start in one turn (those released for it, and new ones arriving
after its counter was reset).

Thread-safety: loop-confined (the handlers run on the loop).
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["WRITES_PER_TURN", "WriteTurns"]

# Small enough to keep other requests' latency low behind a burst, large enough to keep
# fan-out cheap (docs/benchmarks.md).
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
