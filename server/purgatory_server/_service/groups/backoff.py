"""A worker group's retry backoff: how long an outcome waits to be offered again.

After a delivery that ended without an ack (its lease lapsed, or a nack that named no
delay), the n-th such failure since the outcome joined the group (or was last redriven)
waits ``delay_ms`` (fixed) or ``delay_ms * 2**(n-1)`` (exponential), capped at
``max_delay_ms``, then drawn uniformly from ``[wait * (1 - jitter), wait]`` (BullMQ's
backoff with jitter). :meth:`RetryBackoff.longest_ms` is the wait without jitter: what a
restart applies to a lease that lapsed while the server was down (no wait was drawn).

Thread safety: immutable; ``random.Random`` is the caller's (loop-confined).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

__all__ = ["MAX_RETRY_DELAY_MS", "BackoffType", "RetryBackoff"]

# SQS's ceiling for a visibility change, and the group's longest lease.
MAX_RETRY_DELAY_MS = 12 * 3600 * 1000
# 2**40 ms is far above the ceiling: no larger exponent is ever needed.
_MAX_SHIFT = 40


class BackoffType(enum.IntEnum):
    """The wire's ``RetryBackoff.Type`` numbers (0: no backoff)."""

    FIXED = 1
    EXPONENTIAL = 2


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """Invariant: ``1 <= delay_ms <= max_delay_ms <= MAX_RETRY_DELAY_MS``, ``0 <= jitter <= 1``."""

    type: BackoffType
    delay_ms: int
    max_delay_ms: int = MAX_RETRY_DELAY_MS
    jitter: float = 0.0

    def longest_ms(self, failures: int) -> int:
        """The wait after the ``failures``-th failed delivery (1 or more), no jitter."""
        if self.type is BackoffType.FIXED:
            wait = self.delay_ms
        else:
            wait = self.delay_ms << min(max(failures - 1, 0), _MAX_SHIFT)
        return min(wait, self.max_delay_ms)

    def wait_ms(self, failures: int, rng: random.Random) -> int:
        """The wait after the ``failures``-th failed delivery, jitter drawn from ``rng``."""
        wait = self.longest_ms(failures)
        if not self.jitter:
            return wait
        low = wait * (1.0 - self.jitter)
        return int(low + rng.random() * (wait - low))
