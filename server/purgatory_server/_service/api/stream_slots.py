"""Caps on open Subscribe streams, per server and per client connection.

An open stream holds server memory (a subscriber, its buffer, a flow-control window a
non-reading client never takes). ``max_subscribers`` bounds one purgatory; these bound the
server and one connection (known by its peer address; every Unix-socket client shares
``unix:``), so one client cannot take every slot. Past either the call ends with
RESOURCE_EXHAUSTED and RetryInfo.

A slot is held from the stream's start until its handler returns: a stream cut as a slow
subscriber keeps it while its last write is blocked in the transport.

Thread-safety: loop-confined (handlers run on the server's event loop).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from purgatory_server._service.model.errors import LimitExceeded

__all__ = ["StreamSlots"]


class StreamSlots:
    __slots__ = ("_by_peer", "_max_per_peer", "_max_total", "total")

    def __init__(self, max_total: int, max_per_peer: int) -> None:
        self._max_total = max_total
        self._max_per_peer = max_per_peer
        self._by_peer: dict[str, int] = {}
        self.total = 0

    @contextmanager
    def hold(self, peer: str) -> Iterator[None]:
        """One slot for the ``with`` block; LimitExceeded if none is free."""
        if self.total >= self._max_total:
            raise LimitExceeded(
                f"the server has {self.total} open Subscribe streams; "
                f"max_subscribe_streams is {self._max_total}"
            )
        held = self._by_peer.get(peer, 0)
        if held >= self._max_per_peer:
            raise LimitExceeded(
                f"this connection has {held} open Subscribe streams; "
                f"max_subscribe_streams_per_connection is {self._max_per_peer}"
            )
        self._by_peer[peer] = held + 1
        self.total += 1
        try:
            yield
        finally:
            self.total -= 1
            left = self._by_peer[peer] - 1
            if left:
                self._by_peer[peer] = left
            else:
                del self._by_peer[peer]
