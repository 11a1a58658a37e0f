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
a window at once (the group's ``max_group_backlog``), and all windows together hold at
most :data:`MAX_RATE_TIMES` times: past either, a delivery that would add one waits as if
its window were full, until some window frees room (capacity that frees up; the bound is
never broken to make room).

Thread safety: loop-confined, like the group.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from purgatory_server._service.groups.ordering import KeySource
from purgatory_server._service.model.outcome import Outcome

__all__ = ["MAX_RATE", "MAX_RATE_TIMES", "MAX_RATE_WINDOW_MS", "RateLimit", "RateLimiter"]

MAX_RATE = 100_000
# Delivery times kept by one group's windows together (a few tens of MB at most).
MAX_RATE_TIMES = 1_000_000
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

    __slots__ = ("_limit", "_max_keys", "_max_times", "_sweep_at", "_times", "_windows")

    def __init__(
        self, limit: RateLimit, max_keys: int = 100_000, max_times: int = MAX_RATE_TIMES
    ) -> None:
        self._limit = limit
        self._max_keys = max_keys
        self._max_times = max_times
        self._times = 0  # in all windows together
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
            self._times -= 1
        if not window:
            del self._windows[key]
            return None
        return window

    def free_at(self, key: str, now: int) -> int:
        """0 when a delivery under ``key`` may go at ``now``; else when it may (wall ms)."""
        window = self._window(key, now)
        if window is None:
            return self._room(now, new_key=True)
        if len(window) >= self._limit.max:
            return window[0] + self._limit.window_ms
        return self._room(now, new_key=False)

    def _room(self, now: int, new_key: bool) -> int:
        """0 while the windows may hold one more time (under a new key: and one more
        key); else when the first time (or key) leaves them."""
        if self._times < self._max_times and (not new_key or len(self._windows) < self._max_keys):
            return 0
        self._sweep(now)
        if self._times < self._max_times and (not new_key or len(self._windows) < self._max_keys):
            return 0
        windows = self._windows.values()
        if self._times >= self._max_times:
            return min(w[0] for w in windows) + self._limit.window_ms
        return min(w[-1] for w in windows) + self._limit.window_ms

    def record(self, key: str, now: int) -> None:
        """A delivery under ``key`` at ``now`` (after :meth:`free_at` said yes)."""
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = deque(maxlen=self._limit.max)
            if len(self._windows) > self._sweep_at:
                self._sweep(now)
        if len(window) < self._limit.max:
            self._times += 1  # else the deque drops its oldest
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
            if kept and key not in self._windows:
                self._windows[key] = deque(kept, maxlen=self._limit.max)
                self._times += len(kept)

    def windows(self, now: int) -> list[tuple[str, list[int]]]:
        """The times still inside the window, per key (tests, diagnostics)."""
        self._sweep(now)
        return [(key, list(window)) for key, window in sorted(self._windows.items())]
