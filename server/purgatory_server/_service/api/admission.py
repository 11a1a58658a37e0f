"""Admission control on the event loop: shed bulk work while the loop runs late.

Work that arrives faster than the one event loop gets through it queues in front of
everything else, due expiries included. :class:`LoopLag` measures that queue as a waiting
callback feels it: how late a timer due every ``interval_s`` runs. :class:`Admission`
refuses new *bulk* requests (``bulk_entries`` or more) while the loop is more than
``shed_lag_ms`` late, with RESOURCE_EXHAUSTED and a RetryInfo of about twice the lag.
Small requests and work already admitted are never refused. Off (``shed_lag_ms`` 0) by
default: on a CPU shared with other processes the loop runs late without the server's
own load.

Thread-safety: loop-confined (the timer runs on the loop; handlers call :meth:`admit`
there).
"""

from __future__ import annotations

import asyncio
from collections import deque

from purgatory_server._service.model.errors import Overloaded

__all__ = ["NO_ADMISSION", "Admission", "LoopLag"]


class LoopLag:
    """How late the loop runs a timer due every ``interval_s``; the largest lateness of
    the last ``window`` ticks (and of the tick overdue now, if the loop is late on it)."""

    __slots__ = ("_due", "_handle", "_interval", "_loop", "_samples")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, interval_s: float = 0.01, window: int = 20
    ) -> None:
        self._loop = loop
        self._interval = interval_s
        self._samples: deque[float] = deque(maxlen=window)
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._due = self._loop.time() + self._interval
        self._handle = self._loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = self._loop.time()
        self._samples.append(max(0.0, now - self._due))
        self._due = now + self._interval
        self._handle = self._loop.call_at(self._due, self._tick)

    @property
    def recent_s(self) -> float:
        overdue = self._loop.time() - self._due if self._handle is not None else 0.0
        return max(overdue, max(self._samples, default=0.0))


class Admission:
    """Refuses bulk requests while :class:`LoopLag` says the loop is late (module doc)."""

    __slots__ = ("_bulk", "_lag", "_shed_s")

    def __init__(self, lag: LoopLag | None, shed_lag_ms: int, bulk_entries: int) -> None:
        self._lag = lag
        self._shed_s = shed_lag_ms / 1000
        self._bulk = bulk_entries

    def admit(self, entries: int, field: str) -> None:
        """Raise :class:`Overloaded` for a request of ``entries`` entries (named
        ``field``) if it is bulk and the loop is late now."""
        lag = self._lag
        if lag is None or entries < self._bulk:
            return
        late = lag.recent_s
        if late > self._shed_s:
            raise Overloaded(field, late, self._bulk)


NO_ADMISSION = Admission(None, 0, 0)
