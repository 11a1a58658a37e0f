"""File descriptors: the process's limit, and the connections it leaves room for.

Connections that take every descriptor leave none for journal segments or even for
``accept``. So ``max_connections`` is clamped to the soft ``RLIMIT_NOFILE`` minus
:data:`FD_HEADROOM`, and :func:`raise_fd_limit` lifts the soft limit to the hard one at
start-up (the server's entry point only: the setting is process-wide).

Thread-safety: called once at start-up, before the server serves.
"""

from __future__ import annotations

import logging

__all__ = ["FD_HEADROOM", "connection_cap", "fd_limit", "raise_fd_limit"]

logger = logging.getLogger("purgatory_server.service")

# Descriptors kept free of client connections: journals, listeners, metrics, cluster.
FD_HEADROOM = 256
# The soft limit asked for when the hard limit is unlimited.
_UNLIMITED_TARGET = 1 << 20


def fd_limit() -> int | None:
    """The soft RLIMIT_NOFILE, or None where the platform has none (unlimited)."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def raise_fd_limit() -> int | None:
    """Lift the soft RLIMIT_NOFILE to the hard limit where allowed; the soft limit now."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            logger.warning("cannot raise the open-files limit from %d to %d: %s", soft, target, exc)
    return fd_limit()


def connection_cap(configured: int, limit: int | None) -> int:
    """``configured`` clamped below the descriptor limit, leaving :data:`FD_HEADROOM`
    (and never below 1: a server that accepts no connection serves nobody)."""
    if limit is None:
        return configured
    room = max(1, limit - FD_HEADROOM) if limit > 2 * FD_HEADROOM else max(1, limit // 2)
    return min(configured, room)
