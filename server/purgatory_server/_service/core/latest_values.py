"""The latest ``value`` signalled on each key, bounded.

``VALUES_AT_LEAST`` operations must see values signalled *before* they were registered
(a follower may reach the offset before the produce request arrives), so a purgatory
remembers the latest value per key. To keep that bounded, at most ``bound`` keys are kept
in least-recently-signalled order; when a new key would exceed the bound, the idle end is
evicted, skipping keys that some pending operation still watches (those are moved to the
recent end instead). The store can therefore exceed ``bound`` only by the number of
distinct keys watched by pending operations, which ``max_pending`` and
``max_keys_per_operation`` bound in turn.

Whether a key is watched is the engine's to say (``is_watched``: its watch lists), asked
only while evicting, so registrations and endings do no bookkeeping here.

Thread safety: loop-confined (signals, registrations and publications all happen on the
purgatory's loop thread); the engine's ``is_watched`` is safe from any thread.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

__all__ = ["LatestValues"]


class LatestValues:
    """A bounded map key -> latest value; ``is_watched(key)`` spares a key from eviction."""

    __slots__ = ("_bound", "_is_watched", "_values")

    def __init__(self, bound: int, is_watched: Callable[[str], bool]) -> None:
        self._bound = bound
        self._is_watched = is_watched
        self._values: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str) -> int | None:
        return self._values.get(key)

    def known(self, keys: Iterable[str]) -> dict[str, int]:
        values = self._values
        return {k: v for k in keys if (v := values.get(k)) is not None}

    def update(self, key: str, value: int) -> None:
        values = self._values
        values[key] = value
        values.move_to_end(key)
        if len(values) > self._bound:
            self._evict()

    def _evict(self) -> None:
        values = self._values
        # Each key is looked at most once per eviction, so this ends even if every key
        # is watched (the store then stays over the bound until they are released).
        for _ in range(len(values)):
            if len(values) <= self._bound:
                return
            key = next(iter(values))
            if self._is_watched(key):
                values.move_to_end(key)
            else:
                del values[key]
