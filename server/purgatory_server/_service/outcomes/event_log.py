"""Outcomes, their per-purgatory sequence, and the retained window subscribers resume from.

Every operation that ends becomes one :class:`Outcome` with a sequence number that is
strictly increasing per purgatory (1, 2, 3, ... with no gaps). The last ``retained``
outcomes are kept so that a subscriber reconnecting with ``after_sequence`` receives
exactly what it missed, while that is still in the window.

The window is bounded in bytes too: it is one of the memory budget's
:class:`~.budget.Reclaimable` holders (:meth:`EventLog.charge_to`), charged what its
outcomes hold (:func:`~.sizes.outcome_bytes`), and gives up its oldest outcomes when the
budget's retained pool needs room (:meth:`EventLog.shed`); a subscriber resuming before
them gets OUT_OF_RANGE, as when ``retained`` is passed.

``EventLog(retained, last_sequence=N, events=[...])`` rebuilds the window and continues
numbering after ``N`` (a durable purgatory's restart).

Thread safety: loop-confined; sequences are assigned only on the purgatory's loop thread,
which makes them gap-free and ordered without a lock.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from purgatory_server._service.model.errors import OutOfRange
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.sizes import outcome_bytes, outcomes_bytes

__all__ = ["EventLog"]


class EventLog:
    """Sequence numbering plus a bounded window of the most recent outcomes."""

    __slots__ = ("_bytes", "_events", "_last", "_retain")

    def __init__(self, retained: int, last_sequence: int = 0, events: Iterable[Outcome] = ()):
        if retained <= 0:
            raise ValueError(f"retained must be positive, got {retained}")
        self._events: deque[Outcome] = deque(maxlen=retained)
        self._last = last_sequence
        self._bytes = 0  # what the window holds (.sizes)
        self._retain: Callable[[int], None] | None = None
        for event in events:
            if self._events and event.sequence != self._events[-1].sequence + 1:
                raise ValueError("restored events must have consecutive sequences")
            if event.sequence > last_sequence:
                raise ValueError("restored events must not be after last_sequence")
            self._events.append(event)
        if self._events and self._events[-1].sequence != last_sequence:
            raise ValueError("the last restored event must carry last_sequence")
        self._bytes = outcomes_bytes(self._events)

    # ----------------------------------------------------------------- memory budget
    def charge_to(self, retain: Callable[[int], None]) -> None:
        """Charge what the window holds, now and from now on, with ``retain(nbytes)``
        (the budget's retained pool, which may call :meth:`shed` to make room)."""
        self._retain = retain
        retain(self._bytes)

    @property
    def retained_bytes(self) -> int:
        return self._bytes

    def shed(self) -> int:
        """Forget the oldest retained outcome; the bytes that frees (0: none left)."""
        if not self._events:
            return 0
        freed = outcome_bytes(self._events.popleft())
        self._bytes -= freed
        return freed

    def _append(self, added: Sequence[Outcome]) -> None:
        """Append ``added``, charging them less what the count bound drops for them."""
        events = self._events
        assert events.maxlen is not None
        dropped = len(events) + len(added) - events.maxlen
        nbytes = outcomes_bytes(added)
        if dropped > 0:  # the oldest go: those retained first, then the first added
            old = min(dropped, len(events))
            nbytes -= outcomes_bytes(itertools.islice(events, old))
            nbytes -= outcomes_bytes(added[: dropped - old])
        events.extend(added)
        self._bytes += nbytes
        if self._retain is not None:
            self._retain(nbytes)  # may shed(), now that the window holds them

    @property
    def last_sequence(self) -> int:
        return self._last

    @property
    def oldest_sequence(self) -> int:
        """The oldest retained sequence; ``last_sequence + 1`` when nothing is retained."""
        return self._events[0].sequence if self._events else self._last + 1

    def __len__(self) -> int:
        return len(self._events)

    def next_sequence(self) -> int:
        self._last += 1
        return self._last

    def append(self, outcome: Outcome) -> None:
        if outcome.sequence != self._last:
            raise ValueError(f"outcome {outcome.sequence} is not the last issued ({self._last})")
        self._append((outcome,))

    def extend(self, outcomes: Sequence[Outcome]) -> None:
        """Append outcomes numbered ``last_sequence + 1``, ``+ 2``, ... in order (one
        call per published batch; the caller numbered them)."""
        if not outcomes:
            return
        first = self._last + 1
        if outcomes[0].sequence != first or outcomes[-1].sequence != first + len(outcomes) - 1:
            raise ValueError(f"outcomes must be numbered from {first} without gaps")
        self._append(outcomes)
        self._last = outcomes[-1].sequence

    def after(self, sequence: int) -> list[Outcome]:
        """Every retained outcome after ``sequence``; OutOfRange if some were dropped."""
        if sequence > self._last:
            raise OutOfRange(
                f"after_sequence {sequence} is beyond the last sequence {self._last}",
                self.oldest_sequence,
            )
        oldest = self.oldest_sequence
        if sequence + 1 < oldest:
            raise OutOfRange(
                f"events after {sequence} are no longer retained; the oldest available "
                f"sequence is {oldest}",
                oldest,
            )
        return list(itertools.islice(self._events, sequence + 1 - oldest, None))

    def snapshot(self) -> list[Outcome]:
        """The retained window, oldest first (for a journal's checkpoint)."""
        return list(self._events)
