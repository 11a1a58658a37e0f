"""Where a purgatory's ended operations go: publish them, then tell the listeners.

Operations ended on the loop thread (signals, force-completes, cancels) are collected in a
plain list and published by the same call's :meth:`Publisher.settle`, with no lock and no
extra loop turn; only the timer's reaper and executor threads hand theirs over through the
:class:`~.inbox.Inbox`, which wakes the loop once per batch. Either way a
:class:`Publisher` has the :class:`~.feed.Feed` publish a batch, then calls each listener
with the batch and its outcomes, in registration order. Listeners are how features hear about
ended operations without the purgatory knowing them (the table retires ids, metrics
count, schedules arm their next occurrence). A listener may register operations, which
publishes again (re-entrant: each batch is taken from the inbox before it is handed on).

Contract: a loop-thread caller that may end operations calls :meth:`Publisher.settle`
before it returns to the loop (what it ended is published then, not on a later turn).

Thread safety: :meth:`put` from any thread; everything else on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from purgatory_server._service.model.ended import Ended
from purgatory_server._service.outcomes.inbox import Inbox

if TYPE_CHECKING:
    from purgatory_server._service.model.outcome import Outcome
    from purgatory_server._service.outcomes.feed import Feed

__all__ = ["EndedListener", "Publisher"]

# The purgatory's operation class (the core's), seen here only as what ended.
Op = TypeVar("Op", bound=Ended)
# (ended operations, their outcomes in the same order) -> None; loop thread.
EndedListener = Callable[["Sequence[Op]", "Sequence[Outcome]"], None]

_NONE: list[Outcome] = []  # settle's answer when nothing ended (never mutated)


class Publisher(Generic[Op]):
    """Inbox -> feed -> listeners for one purgatory (see module docstring)."""

    __slots__ = ("_ended", "_feed", "_inbox", "_listeners", "_loop", "_loop_thread")

    def __init__(
        self,
        feed: Feed,
        loop: asyncio.AbstractEventLoop,
        listeners: Sequence[EndedListener[Op]] = (),
    ) -> None:
        self._feed = feed
        self._listeners: list[EndedListener[Op]] = list(listeners)
        self._inbox: Inbox[Op] = Inbox(loop, self.publish)
        self._loop = loop
        self._loop_thread = threading.get_ident()
        # Ended on the loop thread, not yet published (settle takes them).
        self._ended: list[Op] = []

    def put(self, op: Op) -> None:
        """Hand an ended operation over (any thread)."""
        if threading.get_ident() == self._loop_thread:
            self._ended.append(op)
        else:
            self._inbox.put(op)

    def add_listener(self, listener: EndedListener[Op]) -> None:
        """Call ``listener`` after every later batch (a feature created on first use)."""
        self._listeners.append(listener)

    def publish(self, ops: list[Op]) -> list[Outcome]:
        """Publish ``ops`` through the feed, then hand them to the listeners (loop)."""
        outcomes = self._feed.publish(ops)
        for listener in self._listeners:
            listener(ops, outcomes)
        return outcomes

    def settle(self) -> list[Outcome]:
        """Publish what ended so far (the caller's own completions included) at once."""
        ops = self._ended
        if ops:
            self._ended = []
            late = self._inbox.take()
            if late:
                ops.extend(late)
            return self.publish(ops)
        ops = self._inbox.take()
        return self.publish(ops) if ops else _NONE

    def settle_soon(self) -> None:
        """Publish what ended on the loop thread on the loop's next turn (start-up, where
        nothing may be published before the caller is done)."""
        if self._ended:
            self._loop.call_soon(self.settle)
