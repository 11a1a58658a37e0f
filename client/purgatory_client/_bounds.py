"""The protocol's fixed bounds, which every server enforces whatever its configuration.

The client must not import the server, so these mirror the server's constants
(tests/client/test_bounds.py compares the two). The CLI refuses a value outside them as a
usage error, before any call; values inside them that a server's own configuration
refuses (``limits.min_timeout_ms``/``max_timeout_ms``) are refused by that server, with
INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_PREFETCH",
    "MAX_RETRY_DELAY_MS",
    "MAX_TIMEOUT_MS",
    "MAX_VISIBILITY_TIMEOUT_MS",
    "MIN_EVERY_MS",
    "MIN_TIMEOUT_MS",
    "MIN_VISIBILITY_TIMEOUT_MS",
]

# A timeout's range on any server: 0 on the wire means "not set", and no server may allow
# more than ~10 years (due times stay far inside int64).
MIN_TIMEOUT_MS = 1
MAX_TIMEOUT_MS = 10 * 365 * 24 * 3600 * 1000
# A schedule's shortest interval.
MIN_EVERY_MS = 100
# A worker group's settings (0 asks for the server's default).
MIN_VISIBILITY_TIMEOUT_MS = 10
MAX_VISIBILITY_TIMEOUT_MS = 12 * 3600 * 1000
MAX_ATTEMPTS = 1000
MAX_PREFETCH = 10_000
# A nack's delay and a retry backoff's waits (SQS's ceiling for a visibility change).
MAX_RETRY_DELAY_MS = 12 * 3600 * 1000
