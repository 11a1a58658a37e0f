"""A worker group's rate limit: at most ``max`` deliveries in any ``window_ms``.

A sliding window log on the server's wall clock: the times of the deliveries still
inside the window, per rate key ("" for a group-wide limit, and under a per-key limit
for outcomes without a key). A delivery at ``now`` is allowed while fewer than ``max``
times lie in ``(now - window_ms, now]``; otherwise the next one may go at the oldest
time plus ``window_ms`` (:meth:`RateLimiter.free_at`). First deliveries and
redeliveries count alike. The times are journaled with each delivery
(``GroupDelivered.delivered_wall_ms``), so a restart of a durable purgatory rebuilds the
window (:meth:`RateLimiter.restore`) and the bound holds across it.

Memory: at most ``max`` times per key, and a key is dropped once its times have all left
the window (a sweep whenever the number of keys doubles). At most ``max_keys`` keys have
a window at once (the group's ``max_group_backlog``): past that, a key without one waits
as if full, until some key's window empties (capacity that frees up; the bound is never
broken to make room).

Thread safety: loop-confined, like the group.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from purgatory_server._service.groups.ordering import KeySource
from purgatory_server._service.model.outcome import Outcome

__all__ = ["MAX_RATE", "MAX_RATE_WINDOW_MS", "RateLimit", "RateLimiter"]

MAX_RATE = 100_000
MAX_RATE_WINDOW_MS = 3_600_000
_FIRST_SWEEP = 64


@dataclass(frozen=True, slots=True)
class RateLimit:
    """``per_key`` None: one window for the whole group."""

    max: int
    window_ms: int
    per_key: KeySource | None = None


class RateLimiter:
    """The delivery times inside the window, per rate key (see module docstring)."""

    __slots__ = ("_limit", "_max_keys", "_sweep_at", "_windows")

    def __init__(self, limit: RateLimit, max_keys: int = 100_000) -> None:
        self._limit = limit
        self._max_keys = max_keys
        self._windows: dict[str, deque[int]] = {}
        self._sweep_at = _FIRST_SWEEP

    @property
    def limit(self) -> RateLimit:
        return self._limit

    def key_of(self, outcome: Outcome) -> str:
        per_key = self._limit.per_key
        if per_key is None:
            return ""
        return per_key.key_of(outcome) or ""

    def _window(self, key: str, now: int) -> deque[int] | None:
        window = self._windows.get(key)
        if window is None:
            return None
        cutoff = now - self._limit.window_ms
        while window and window[0] <= cutoff:
            window.popleft()
        if not window:
            del self._windows[key]
            return None
        return window

    def free_at(self, key: str, now: int) -> int:
        """0 when a delivery under ``key`` may go at ``now``; else when it may (wall ms)."""
        window = self._window(key, now)
        if window is None:
            return self._room_for_a_key(now)
        if len(window) < self._limit.max:
            return 0
        return window[0] + self._limit.window_ms

    def _room_for_a_key(self, now: int) -> int:
        """0 while a new key may have a window; else when the first one empties."""
        if len(self._windows) < self._max_keys:
            return 0
        self._sweep(now)
        if len(self._windows) < self._max_keys:
            return 0
        return min(w[-1] for w in self._windows.values()) + self._limit.window_ms

    def record(self, key: str, now: int) -> None:
        """A delivery under ``key`` at ``now`` (after :meth:`free_at` said yes)."""
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = deque(maxlen=self._limit.max)
            if len(self._windows) > self._sweep_at:
                self._sweep(now)
        window.append(now)

    def _sweep(self, now: int) -> None:
        for key in list(self._windows):
            self._window(key, now)
        self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._windows))

    def restore(self, windows: Iterable[tuple[str, Iterable[int]]], now: int) -> None:
        """Delivery times recovered from the journal (start-up); those already out of
        the window are dropped."""
        cutoff = now - self._limit.window_ms
        for key, times in windows:
            kept = sorted(t for t in times if t > cutoff)[-self._limit.max :]
            if kept:
                self._windows[key] = deque(kept, maxlen=self._limit.max)

    def windows(self, now: int) -> list[tuple[str, list[int]]]:
        """The times still inside the window, per key (tests, diagnostics)."""
        self._sweep(now)
        return [(key, list(window)) for key, window in sorted(self._windows.items())]
