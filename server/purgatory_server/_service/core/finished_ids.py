"""The dedup window: finished operation ids remembered for a time, bounded in bytes.

Why by time: a client that re-sends after a cut stream, a restart or a timeout does so
seconds to minutes later, however many other operations ended meanwhile. A memory of the
last N finished ids forgets sooner under a burst (a burst of N outcomes pushed out ids a
client was about to re-send, and they registered again). So an id is remembered for
``window_ms`` after its outcome (``Outcome.complete_time_ms``, the server's wall clock),
like SQS's deduplication interval, and a re-send inside the window answers with the
recorded outcome.

Why bounded in bytes: the window alone would let a high outcome rate hold unbounded
memory. Past ``max_bytes`` the oldest entries go first, even inside their window; each
such early eviction is counted (:attr:`FinishedIds.evicted_early`, exported as
``purgatory.dedup.evicted``), so an operator sees when the window is not held and raises
the cap. Expired entries are dropped lazily, as later outcomes arrive: an id may be
remembered longer than the window, never shorter (unless the byte cap evicts it).

The estimate of an entry's size (:func:`entry_bytes`) counts what it keeps alive: the id,
the payload (shared by the definition and the outcome), the keys, the result data and a
fixed overhead for the objects.

Thread safety: loop-confined, like the operation table that owns it.
"""

from __future__ import annotations

from collections import OrderedDict

from purgatory_server._service.core.operation import OperationDefinition
from purgatory_server._service.outcomes.event_log import Outcome

__all__ = ["ENTRY_OVERHEAD", "FinishedIds", "entry_bytes"]

# Bytes of the Python objects behind one entry besides its strings and bytes (the
# OrderedDict node, the tuple, the outcome and definition records): measured roughly.
ENTRY_OVERHEAD = 400

Entry = tuple[OperationDefinition, Outcome]


def entry_bytes(definition: OperationDefinition, outcome: Outcome) -> int:
    """The estimated bytes one remembered id keeps alive."""
    size = ENTRY_OVERHEAD + len(outcome.operation_id) + len(definition.payload)
    size += len(outcome.result.data)
    for key in definition.keys:
        size += len(key) + 8
    return size


class FinishedIds:
    """Finished ids -> (definition, outcome), oldest first (see the module docstring)."""

    __slots__ = ("bytes", "entries", "evicted_early", "max_bytes", "window_ms")

    def __init__(self, window_ms: int, max_bytes: int) -> None:
        self.window_ms = window_ms
        self.max_bytes = max_bytes
        # Read-only for others (listings iterate it); changed only here.
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.bytes = 0
        # Entries the byte cap dropped while still inside their window.
        self.evicted_early = 0

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, op_id: object) -> bool:
        return op_id in self.entries

    @property
    def enabled(self) -> bool:
        return self.window_ms > 0 and self.max_bytes > 0

    def get(self, op_id: str) -> Entry | None:
        return self.entries.get(op_id)

    def add(self, definition: OperationDefinition, outcome: Outcome) -> None:
        """Remember one finished id (a later outcome of the same id replaces it)."""
        if not self.enabled:
            return
        entries = self.entries
        op_id = outcome.operation_id
        old = entries.pop(op_id, None)
        if old is not None:
            self.bytes -= entry_bytes(*old)
        entries[op_id] = (definition, outcome)
        self.bytes += entry_bytes(definition, outcome)

    def pop_oldest(self) -> int:
        """Forget the oldest entry (the memory budget's shedding); the bytes freed, 0 if
        empty. Counted as an early eviction: it may still be inside its window."""
        if not self.entries:
            return 0
        _, (definition, outcome) = self.entries.popitem(last=False)
        freed = entry_bytes(definition, outcome)
        self.bytes -= freed
        self.evicted_early += 1
        return freed

    def trim(self) -> None:
        """Forget what is past the window (relative to the newest outcome) and, oldest
        first, what is over the byte cap."""
        entries = self.entries
        if not entries:
            return
        newest = entries[next(reversed(entries))][1].complete_time_ms
        horizon = newest - self.window_ms
        popitem = entries.popitem
        while entries:
            oldest = entries[next(iter(entries))]
            over = self.bytes > self.max_bytes
            if not over and oldest[1].complete_time_ms >= horizon:
                return
            _, (definition, outcome) = popitem(last=False)
            self.bytes -= entry_bytes(definition, outcome)
            if outcome.complete_time_ms >= horizon:
                self.evicted_early += 1
