"""Subscribers of a purgatory's outcome stream, each with a buffer bounded twice.

Publishing never waits for a subscriber: :meth:`Subscriber.offer` appends to the
subscriber's own buffer, which holds at most ``buffer`` events *and* ``buffer_bytes``
bytes (:func:`outcome_size`). The offer that would pass either bound *cuts* the
subscriber, at once and in the same loop turn:

- its buffer (and any replay not yet taken) is dropped, so the memory is released now,
  not when the client eventually reads;
- ``on_cut`` runs (the feed unsubscribes it: it no longer counts against
  ``max_subscribers`` and is offered nothing more);
- its stream ends with RESOURCE_EXHAUSTED (:class:`~.errors.SlowSubscriber`) naming the
  sequence to resume after: the last event the stream *took* (:meth:`pop`), i.e. handed
  to the transport. Events handed over before the cut still reach the client, then the
  status; nothing after the resume point was sent, so resuming loses and repeats nothing.

A client that never reads leaves the stream blocked in the transport's write (HTTP/2 flow
control), holding one flow-control window and the event being written, not a buffer.

Replay and live hand-over without a gap: see :mod:`.feed`. The replay list references
outcomes the retained window holds anyway.

Thread safety: loop-confined (offers come from the publisher on the loop thread).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from purgatory_server._service.config.logs import log_subscriber_cut_off
from purgatory_server._service.model.errors import SlowSubscriber
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.stream_queue import StreamQueue

__all__ = ["BufferBudget", "EventFilter", "Subscriber", "outcome_size"]

# Bytes an outcome costs beyond its variable fields (the tuple, its ints and the
# OperationEvent it becomes on the way out); an estimate, deliberately on the high side.
OUTCOME_OVERHEAD_BYTES = 512


def outcome_size(outcome: Outcome) -> int:
    """Estimated bytes ``outcome`` holds: payload, result data, keys, id, overhead."""
    result = outcome.result
    size = OUTCOME_OVERHEAD_BYTES + len(outcome.payload) + len(result.data)
    size += len(outcome.operation_id) + sum(map(len, outcome.keys))
    return size + sum(map(len, result.sources))


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


def _ignore_cut(_: Subscriber) -> None:
    return None


class BufferBudget(Protocol):
    """Where a stream's buffered bytes are charged (:class:`~..core.budget.ServerBudget`)."""

    def try_charge(self, nbytes: int) -> bool: ...

    def release(self, nbytes: int) -> None: ...


class Subscriber(StreamQueue[Outcome]):
    """One open Subscribe stream: replayed events, then a bounded live buffer."""

    __slots__ = (
        "_buffer",
        "_buffer_bytes",
        "_buffers",
        "_bytes",
        "_charges",
        "_filter",
        "_on_cut",
        "_replay",
        "_sizes",
        "caught_up",
        "sent",
        "start_after",
    )

    def __init__(
        self,
        event_filter: EventFilter,
        buffer: int,
        replay: Iterable[Outcome],
        start_after: int,
        *,
        buffer_bytes: int = 1 << 62,
        on_cut: Callable[[Subscriber], None] = _ignore_cut,
        buffers: BufferBudget | None = None,
    ) -> None:
        self._filter = event_filter
        self._buffers = buffers
        self._buffer = buffer
        self._buffer_bytes = buffer_bytes
        self._on_cut = on_cut
        self._replay: deque[Outcome] | None = deque(o for o in replay if event_filter.matches(o))
        super().__init__()
        # Sizes of the buffered outcomes, in step with _queue; _bytes is their sum.
        self._sizes: deque[int] = deque()
        self._bytes = 0
        # What each buffered outcome charged to ``buffers`` (0: nothing), in step too.
        self._charges: deque[int] = deque()
        self.start_after = start_after
        # The last sequence the stream took to send: the resume point if it is cut.
        self.sent = start_after
        # The highest sequence this stream has considered (sent, buffered or filtered out):
        # once the buffer is empty, the stream is caught up to it (heartbeats report it).
        self.caught_up = max([start_after, *(o.sequence for o in self._replay)])

    @property
    def buffered(self) -> int:
        return len(self._queue)

    @property
    def buffered_bytes(self) -> int:
        """Estimated bytes the live buffer holds (0 once cut)."""
        return self._bytes

    def offer(self, outcome: Outcome, size: int = 0) -> None:
        """Buffer ``outcome`` (estimated at ``size`` bytes), or cut this subscriber if
        that would pass a bound (see the module docstring)."""
        if self._error is not None:
            return
        self.caught_up = outcome.sequence
        if not self._filter.matches(outcome):
            return
        queue = self._queue
        # One outcome always fits an empty buffer, so no outcome cuts every subscriber.
        if queue and (len(queue) >= self._buffer or self._bytes + size > self._buffer_bytes):
            self._cut()
            return
        buffers = self._buffers
        if buffers is not None:
            if buffers.try_charge(size):
                self._charges.append(size)
            elif queue:  # the server's memory budget is full: this stream holds some
                self._cut()
                return
            else:  # one outcome always fits an empty buffer (progress for everyone)
                self._charges.append(0)
        queue.append(outcome)
        self._sizes.append(size)
        self._bytes += size
        self._wake.set()

    def drop(self) -> None:
        """Forget what is buffered and give its charge back (the stream is gone)."""
        self._queue.clear()
        self._sizes.clear()
        self._bytes = 0
        charges = self._charges
        if charges:
            if self._buffers is not None:
                self._buffers.release(sum(charges))
            charges.clear()

    def _cut(self) -> None:
        """Drop the buffer now, leave the feed, end the stream at the last event sent."""
        self.drop()
        self._replay = None
        log_subscriber_cut_off(self._buffer, self.sent)
        self.close(SlowSubscriber(self.sent, self._buffer, self._buffer_bytes))
        self._on_cut(self)

    async def wait(self, idle_s: float | None = None) -> bool:
        """True once there is something to :meth:`pop`; False after ``idle_s`` with
        nothing (the caller sends a heartbeat); raises the closing error once closed
        with nothing left."""
        if self._replay:
            return True
        return await self._ready(idle_s)

    def pop(self) -> Outcome | None:
        """The next event to send (replay first), or None; it counts as sent from now."""
        replay = self._replay
        if replay:
            outcome = replay.popleft()
        elif self._queue:
            outcome = self._queue.popleft()
            self._bytes -= self._sizes.popleft()
            if self._buffers is not None and (charged := self._charges.popleft()):
                self._buffers.release(charged)
        else:
            return None
        self.sent = outcome.sequence
        return outcome

    async def next_batch(self, idle_s: float | None = None) -> list[Outcome]:
        """Everything there is to send now (see :meth:`wait`); ``[]`` after ``idle_s``."""
        if not await self.wait(idle_s):
            return []
        batch: list[Outcome] = []
        while (outcome := self.pop()) is not None:
            batch.append(outcome)
        return batch
