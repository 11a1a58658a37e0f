"""Long-polls that survive a server restart: client-made operation ids, gRPC's retry
policy in the channel's service config, and the re-sends on top of it.

A registration carries an operation id (the caller's, or :func:`new_operation_id`), so a
re-send is the same operation to the server: it answers with the operation it already
has, waiting on it if pending or returning its outcome if it ended (docs/service.md,
"Operation ids and idempotency"). The re-sends themselves, under the client's
``ResumePolicy``: :class:`~purgatory_client._resume.LongPollRetry`. No I/O here.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = ["KEEPALIVE_OPTIONS", "SERVICE_CONFIG", "channel_options", "new_operation_id"]

# The methods whose re-send is idempotent because every request carries an operation id
# (made up below when the caller gave none). gRPC's own retry policy re-sends them after
# UNAVAILABLE when the call failed before any answer came back (a dropped connection, a
# server that refused it while shutting down). gRPC allows at most 5 attempts, spaced by
# a random fraction of the backoff, and an attempt fails at once while the channel is
# reconnecting; so it rides out a blip, and the clients' long-poll helpers re-send on
# top of it, by the client's ``resume`` policy, to ride out a server restart.
RETRIED_METHODS = ("TryCompleteElseWatch", "BatchTryCompleteElseWatch")
SERVICE_NAME = "purgatory.v1.PurgatoryService"
RETRY_POLICY: Mapping[str, Any] = MappingProxyType(
    {
        "maxAttempts": 3,
        "initialBackoff": "0.05s",
        "maxBackoff": "0.2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
)
SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{"service": SERVICE_NAME, "method": m} for m in RETRIED_METHODS],
                "retryPolicy": dict(RETRY_POLICY),
            }
        ]
    }
)


# Liveness of the connection itself (docs/clients.md "Failover"): while a call is open the
# client pings every 2 s and closes the connection when a ping is not answered within 2 s,
# so a call to a server that was paused, cut off or lost without a FIN fails UNAVAILABLE
# after at most ~4 s instead of waiting for its deadline (or forever: long-polls and
# streams have none), and a routed call then re-resolves the owner (_routing). Pings go on
# however long a stream stays quiet (``max_pings_without_data`` 0); the server accepts
# one a second (server_options). A new connection must finish its handshake within 2 s
# (``min_reconnect_backoff_ms`` is gRPC core's minimum connect timeout, 20 s otherwise),
# so a paused server at the head of an ``ipv4:a,b`` target is skipped for the next one;
# and a lost server is retried at least every 5 s (``max_reconnect_backoff_ms``; 120 s
# otherwise). Each can be overridden through ``options``.
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 2000),
    # gRPC core 1.85 also bounds an unanswered ping by ``ping_timeout_ms`` (60 s) and
    # spaces pings by ``min_time_between_pings_ms`` (5 min): without these two a paused
    # server was measured to hold a call for its whole deadline (20 s of 20 s).
    ("grpc.http2.ping_timeout_ms", 2000),
    ("grpc.http2.min_time_between_pings_ms", 1000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.min_reconnect_backoff_ms", 2000),
    ("grpc.max_reconnect_backoff_ms", 5000),
)


def channel_options(options: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``options`` plus the retry policy's service config and the keepalive settings,
    each unless the caller set it."""
    out = list(options)
    given = {name for name, _ in out}
    if "grpc.service_config" not in given:
        out.append(("grpc.service_config", SERVICE_CONFIG))
    out.extend(option for option in KEEPALIVE_OPTIONS if option[0] not in given)
    return out


class _OperationIds:
    """Client-made operation ids: a random 64-bit prefix per process and a counter.

    A registration without an id would be a new operation each time it is re-sent; with
    one of these it is the same operation to the server. Renewed in a forked child so
    two processes never share a prefix; ``next`` on a count is atomic under the GIL.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._prefix = f"c{secrets.token_hex(8)}-"
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter)}"


_IDS = _OperationIds()
os.register_at_fork(after_in_child=_IDS.reset)


def new_operation_id() -> str:
    """A fresh operation id, unique across clients (see :class:`_OperationIds`)."""
    return _IDS.next()
