"""Each outcome encoded once, the same bytes sent to every Subscribe stream.

Encoding an ``OperationEvent`` is the costly part of sending an outcome. Subscribe sends
the encoded bytes (the edge passes ``bytes`` through), cached while more than one stream
is open on the purgatory so the others need not encode again.

The cache is bounded in bytes (``CACHE_BYTES``), oldest first out, and charged to the
server's memory budget: with no room there the bytes are sent uncached. An entry keeps its
outcome alive so its ``id`` cannot be reused while cached (the key is the identity,
checked on a hit).

Thread safety: the event loop's, like the streams that call it.
"""

from __future__ import annotations

from collections import OrderedDict

from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import event_to_proto

__all__ = ["CACHE_BYTES", "EncodedEvents"]

# Enough for the outcomes of the last few batches at their largest (64 KiB payload and
# 256 KiB result data each): the streams of one purgatory send the same recent outcomes.
CACHE_BYTES = 16 << 20
# An entry's own cost beyond its bytes (the dict slot, the tuple, the bytes header).
ENTRY_BYTES = 160


class EncodedEvents:
    """Encoded outcomes by identity, bounded and charged (module docstring)."""

    __slots__ = ("_budget", "_bytes", "_capacity", "_entries", "hits")

    def __init__(self, budget: ServerBudget, capacity: int = CACHE_BYTES) -> None:
        self._budget = budget
        self._capacity = capacity
        self._entries: OrderedDict[int, tuple[Outcome, bytes]] = OrderedDict()
        self._bytes = 0
        self.hits = 0

    def encode(self, outcome: Outcome, shared: bool) -> bytes:
        """``outcome`` as an encoded ``OperationEvent``; cached when ``shared`` (other
        streams will send it too)."""
        entries = self._entries
        entry = entries.get(id(outcome))
        if entry is not None and entry[0] is outcome:
            self.hits += 1
            return entry[1]
        data = event_to_proto(outcome).SerializeToString()
        if shared:
            cost = len(data) + ENTRY_BYTES
            if cost <= self._capacity and self._budget.try_charge(cost):
                entries[id(outcome)] = (outcome, data)
                self._bytes += cost
                while self._bytes > self._capacity:
                    _, (_, old) = entries.popitem(last=False)
                    self._forget(len(old) + ENTRY_BYTES)
        return data

    def _forget(self, cost: int) -> None:
        self._bytes -= cost
        self._budget.release(cost)

    def clear(self) -> None:
        """Drop every entry and give its bytes back (the server stops)."""
        for _, data in self._entries.values():
            self._forget(len(data) + ENTRY_BYTES)
        self._entries.clear()
