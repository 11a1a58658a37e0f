"""A worker group's settings and the defaults a first join fills in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from purgatory_server._service.groups.backoff import RetryBackoff

if TYPE_CHECKING:
    from purgatory_server._service.groups.selection import Selection

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_PREFETCH",
    "DEFAULT_VISIBILITY_TIMEOUT_MS",
    "MAX_ATTEMPTS",
    "MAX_PREFETCH",
    "MAX_VISIBILITY_TIMEOUT_MS",
    "MIN_VISIBILITY_TIMEOUT_MS",
    "GroupConfig",
]

DEFAULT_VISIBILITY_TIMEOUT_MS = 30_000
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_PREFETCH = 16
# Bounds (INVALID_ARGUMENT outside them): a lease shorter than the wheel can resolve is
# meaningless, one longer than 12 hours is SQS's own ceiling.
MIN_VISIBILITY_TIMEOUT_MS = 10
MAX_VISIBILITY_TIMEOUT_MS = 12 * 3600 * 1000
MAX_ATTEMPTS = 1000
MAX_PREFETCH = 10_000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Fixed for a group's life (delete and re-create the group to change it)."""

    visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    # Priorities, ordering keys, a rate limit (None: sequence order, unlimited).
    selection: Selection | None = None
    # None: an outcome whose delivery ended unacked is offered again at once.
    backoff: RetryBackoff | None = None
