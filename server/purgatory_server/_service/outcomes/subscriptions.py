"""Subscribers of a purgatory's outcome stream, each with a bounded buffer.

Publishing never waits for a subscriber: :meth:`Subscriber.offer` appends to the
subscriber's own buffer or, when that holds ``buffer`` events already, marks the
subscriber as overflowed and stops buffering for it. Its stream then sends what is
buffered and ends with RESOURCE_EXHAUSTED naming the sequence to resume after, so a slow
subscriber can neither block completions nor hold back other subscribers, and its memory
is bounded by ``buffer`` events.

Replay and live hand-over without a gap: the purgatory snapshots the retained events
after ``after_sequence`` and registers the subscriber in the same loop turn, so every
later outcome is offered to the buffer and none falls between the two.

Thread safety: loop-confined (offers come from the publisher on the loop thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from purgatory_server._service.config.logs import log_subscriber_cut_off
from purgatory_server._service.core.errors import SlowSubscriber
from purgatory_server._service.core.operation_state import OperationState
from purgatory_server._service.outcomes.event_log import Outcome
from purgatory_server._service.outcomes.stream_queue import StreamQueue

__all__ = ["EventFilter", "Subscriber"]


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which outcomes a subscriber wants; empty fields match everything."""

    states: frozenset[OperationState] = frozenset()
    keys: frozenset[str] = frozenset()
    operation_id_prefix: str = ""

    def matches(self, outcome: Outcome) -> bool:
        if self.states and outcome.state not in self.states:
            return False
        if self.keys and self.keys.isdisjoint(outcome.keys):
            return False
        return outcome.operation_id.startswith(self.operation_id_prefix)


MATCH_ALL = EventFilter()


class Subscriber(StreamQueue[Outcome]):
    """One open Subscribe stream: replayed events, then a bounded live buffer."""

    __slots__ = (
        "_buffer",
        "_filter",
        "_on_cut_off",
        "_replay",
        "caught_up",
        "start_after",
    )

    def __init__(
        self,
        event_filter: EventFilter,
        buffer: int,
        replay: Iterable[Outcome],
        start_after: int,
        on_cut_off: Callable[[], None] | None = None,
    ) -> None:
        self._filter = event_filter
        self._on_cut_off = on_cut_off  # counts cut-offs (the feed's metric)
        self._buffer = buffer
        self._replay: list[Outcome] | None = [o for o in replay if event_filter.matches(o)]
        super().__init__()
        self.start_after = start_after
        # The highest sequence this stream has considered (sent, buffered or filtered out):
        # once the buffer is empty, the stream is caught up to it (heartbeats report it).
        self.caught_up = max([start_after, *(o.sequence for o in self._replay)])

    @property
    def buffered(self) -> int:
        return len(self._queue)

    def offer(self, outcome: Outcome) -> None:
        if self._error is not None:
            return
        self.caught_up = outcome.sequence
        if not self._filter.matches(outcome):
            return
        if len(self._queue) >= self._buffer:
            # Everything before this outcome was buffered (or filtered out): resume after it.
            log_subscriber_cut_off(self._buffer, outcome.sequence - 1)
            if self._on_cut_off is not None:
                self._on_cut_off()
            self.close(SlowSubscriber(outcome.sequence - 1, self._buffer))
            return
        self._queue.append(outcome)  # _put, inlined: once per outcome per subscriber
        self._wake.set()

    async def next_batch(self, idle_s: float | None = None) -> list[Outcome]:
        """The next events to send; raises the closing error when there are none left.

        With ``idle_s``, an empty list once that long passed with nothing to send (the
        caller then sends a heartbeat).
        """
        if self._replay is not None:
            replay, self._replay = self._replay, None
            if replay:
                return replay
        return await self._take(idle_s)
