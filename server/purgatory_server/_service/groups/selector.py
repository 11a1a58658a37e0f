"""The ready entries of a group that has a :class:`~.selection.Selection`, and which
one to lease next.

A heap of ``(-priority, sequence)``: the highest priority first, then the oldest. With
ordering keys only each key's head is in it (:mod:`.ordering`), so priority decides
*between* keys and sequence order *within* one: a high-priority outcome waits behind
its key's older ones whatever their priority. With a rate limit (:mod:`.rate_limit`)
:meth:`Selector.next` stops when the group's window is full, and under a per-key limit
sets aside (parks) the entries of full keys; :meth:`Selector.wake_at` says when to try
again and :meth:`Selector.unpark` puts the parked back.

Stale heap items (acked, dead, leased, a key's former head) are skipped when popped:
:meth:`Selector.next` re-checks every item against the entry it names.

Thread safety: loop-confined, like the group.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from purgatory_server._service.groups.entry import EntryState, GroupEntry
from purgatory_server._service.groups.ordering import KeyQueues
from purgatory_server._service.groups.priority import priority_of
from purgatory_server._service.groups.rate_limit import RateLimiter
from purgatory_server._service.groups.selection import Selection

__all__ = ["Selector"]


class Selector:
    """Ready entries in delivery order (see module docstring)."""

    __slots__ = ("_heap", "_keys", "_parked", "_rules", "limiter", "selection")

    def __init__(self, selection: Selection, max_rate_keys: int = 100_000) -> None:
        self.selection = selection
        self._rules = selection.priorities
        self._heap: list[tuple[int, int]] = []
        self._keys = KeyQueues() if selection.ordering is not None else None
        rate = selection.rate_limit
        self.limiter = None if rate is None else RateLimiter(rate, max_rate_keys)
        self._parked: dict[str, list[tuple[int, int]]] = {}

    def priority(self, entry: GroupEntry) -> int:
        return priority_of(self._rules, entry.outcome) if self._rules else 0

    def ordering_key(self, entry: GroupEntry) -> str | None:
        ordering = self.selection.ordering
        return None if ordering is None else ordering.key_of(entry.outcome)

    def _push(self, entry: GroupEntry) -> None:
        heapq.heappush(self._heap, (-self.priority(entry), entry.sequence))

    def ready(self, entry: GroupEntry, entries: Mapping[int, GroupEntry]) -> None:
        """``entry`` is READY (intake, an expired lease, a redrive, a restore)."""
        keys = self._keys
        key = None if keys is None else self.ordering_key(entry)
        if keys is None or key is None:
            self._push(entry)
            return
        keys.give_back(key, entry.sequence)
        keys.add(key, entry.sequence)
        self._push_head(key, entries)

    def _push_head(self, key: str, entries: Mapping[int, GroupEntry]) -> None:
        assert self._keys is not None
        head = self._keys.head(key)
        if head is not None:
            entry = entries.get(head)
            if entry is not None and entry.state is EntryState.READY:
                self._push(entry)

    def leased_restored(self, entry: GroupEntry) -> None:
        """A lease recovered still running (start-up): its key is in flight."""
        keys = self._keys
        key = None if keys is None else self.ordering_key(entry)
        if keys is not None and key is not None:
            keys.add(key, entry.sequence)
            keys.take(key, entry.sequence)

    def settled(self, entry: GroupEntry, entries: Mapping[int, GroupEntry]) -> None:
        """``entry`` is owed no more (acked, dead-lettered, discarded): its key's next
        outcome may go."""
        keys = self._keys
        key = None if keys is None else self.ordering_key(entry)
        if keys is not None and key is not None:
            keys.remove(key, entry.sequence)
            self._push_head(key, entries)

    def next(self, entries: Mapping[int, GroupEntry], now: int) -> tuple[GroupEntry, int] | None:
        """The entry to lease now and its priority, taken out of the ready set; None when
        none may go."""
        heap = self._heap
        keys = self._keys
        limiter = self.limiter
        per_key = limiter is not None and limiter.limit.per_key is not None
        if limiter is not None and not per_key and limiter.free_at("", now):
            return None
        while heap:
            item = heapq.heappop(heap)
            entry = entries.get(item[1])
            if entry is None or entry.state is not EntryState.READY:
                continue
            if keys is not None:
                key = self.ordering_key(entry)
                if key is not None and keys.head(key) != entry.sequence:
                    continue  # not its key's turn: pushed again when it is
            if per_key:
                assert limiter is not None
                rate_key = limiter.key_of(entry.outcome)
                if limiter.free_at(rate_key, now):
                    self._parked.setdefault(rate_key, []).append(item)
                    continue
            return entry, -item[0]
        return None

    def leased(self, entry: GroupEntry, now: int) -> str:
        """``entry`` (from :meth:`next`) was leased at ``now``; its rate key ("")."""
        keys = self._keys
        if keys is not None:
            key = self.ordering_key(entry)
            if key is not None:
                keys.take(key, entry.sequence)
        limiter = self.limiter
        if limiter is None:
            return ""
        rate_key = limiter.key_of(entry.outcome)
        limiter.record(rate_key, now)
        return rate_key

    def wake_at(self, now: int) -> int:
        """When a rate-limited ready entry may go (wall ms); 0: nothing waits on it."""
        limiter = self.limiter
        if limiter is None:
            return 0
        if limiter.limit.per_key is None:
            return limiter.free_at("", now) if self._heap else 0
        # A parked key with room already (its window slid meanwhile): at once.
        return min((limiter.free_at(key, now) or now for key in self._parked), default=0)

    def unpark(self, now: int) -> None:
        """The parked entries whose key has room again go back to the heap."""
        limiter = self.limiter
        if limiter is None or not self._parked:
            return
        for key in list(self._parked):
            if not limiter.free_at(key, now):
                for item in self._parked.pop(key):
                    heapq.heappush(self._heap, item)
