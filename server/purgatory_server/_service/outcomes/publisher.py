"""The loop side of a purgatory's inbox: publish what ended, then tell the listeners.

On the loop a :class:`Publisher` takes ended operations from the :class:`~.inbox.Inbox`
in batches, has the :class:`~.feed.Feed` publish them, then calls each listener with the
batch and its outcomes, in registration order. Listeners are how features hear about
ended operations without the purgatory knowing them (the table retires ids, metrics
count, schedules arm their next occurrence). A listener may register operations, which
publishes again (re-entrant: each batch is taken from the inbox before it is handed on).

Thread safety: :meth:`put` from any thread (the inbox's); everything else on the loop.
"""

from __future__ import annotations

import asyncio
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

    __slots__ = ("_feed", "_inbox", "_listeners", "put")

    def __init__(
        self,
        feed: Feed,
        loop: asyncio.AbstractEventLoop,
        listeners: Sequence[EndedListener[Op]] = (),
    ) -> None:
        self._feed = feed
        self._listeners: list[EndedListener[Op]] = list(listeners)
        self._inbox: Inbox[Op] = Inbox(loop, self.publish)
        # Hand an ended operation over (any thread): the inbox's put, bound once.
        self.put: Callable[[Op], None] = self._inbox.put

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
        ops = self._inbox.take()
        return self.publish(ops) if ops else _NONE
