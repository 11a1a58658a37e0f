"""Ordering keys: outcomes of one key delivered in sequence order, one at a time.

:class:`KeySource` says where an outcome's key comes from (its first watched key, or
its operation id up to a separator); an outcome without one is unordered. A
:class:`KeyQueues` holds, per key, the sequences of the entries the group still owes
(ready or leased, not dead) in sequence order, and which of them is in flight. Only a
key's *head* (its lowest sequence) may be leased, and only while nothing of the key is:
the next outcome of a key goes out once the one before it was acked or dead-lettered
(a lease that runs out gives the head back, ready again). A redriven dead letter joins
its key's queue by sequence, behind whatever of the key is in flight.

Invariants: a key is in ``_queues`` only while its queue is non-empty; ``_in_flight[k]``
is a member of ``_queues[k]``. Thread safety: loop-confined, like the group.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from purgatory_server._service.model.outcome import Outcome

__all__ = ["MAX_SEPARATOR_LENGTH", "KeyQueues", "KeySource"]

MAX_SEPARATOR_LENGTH = 16


@dataclass(frozen=True, slots=True)
class KeySource:
    """``separator`` empty: the first watched key; else the operation id up to it."""

    separator: str = ""

    def key_of(self, outcome: Outcome) -> str | None:
        """The outcome's key, None when it has none."""
        separator = self.separator
        if not separator:
            keys = outcome.keys
            return keys[0] if keys else None
        head, found, _ = outcome.operation_id.partition(separator)
        return head if found else None


class KeyQueues:
    """Per key: the owed sequences in order and the one in flight (see module docstring)."""

    __slots__ = ("_in_flight", "_queues")

    def __init__(self) -> None:
        self._queues: dict[str, list[int]] = {}
        self._in_flight: dict[str, int] = {}

    def __len__(self) -> int:
        """Keys with something owed (tests, listing)."""
        return len(self._queues)

    def add(self, key: str, sequence: int) -> None:
        """``sequence`` is owed (intake, redrive, restore); idempotent."""
        queue = self._queues.get(key)
        if queue is None:
            self._queues[key] = [sequence]
            return
        at = bisect.bisect_left(queue, sequence)
        if at == len(queue) or queue[at] != sequence:
            queue.insert(at, sequence)

    def remove(self, key: str, sequence: int) -> None:
        """``sequence`` is no longer owed (acked, dead-lettered, discarded)."""
        if self._in_flight.get(key) == sequence:
            del self._in_flight[key]
        queue = self._queues.get(key)
        if queue is None:
            return
        at = bisect.bisect_left(queue, sequence)
        if at < len(queue) and queue[at] == sequence:
            del queue[at]
            if not queue:
                del self._queues[key]

    def head(self, key: str) -> int | None:
        """The sequence the key may deliver next; None while one is in flight."""
        if key in self._in_flight:
            return None
        queue = self._queues.get(key)
        return queue[0] if queue else None

    def take(self, key: str, sequence: int) -> None:
        """The head was leased: the key is in flight until :meth:`give_back` or
        :meth:`remove`."""
        self._in_flight[key] = sequence

    def give_back(self, key: str, sequence: int) -> None:
        """The in-flight lease ran out: the entry is owed again (still in its queue)."""
        if self._in_flight.get(key) == sequence:
            del self._in_flight[key]
