"""Long-polls that survive a server restart: client-made operation ids, gRPC's retry
policy in the channel's service config, and the re-sends on top of it.

A registration carries an operation id (the caller's, or :func:`new_operation_id`), so a
re-send is the same operation to the server: it answers with the operation it already
has, waiting on it if pending or returning its outcome if it ended (docs/service.md,
"Operation ids and idempotency"). No I/O here: the sync and async clients only differ in
how they sleep between re-sends.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from purgatory_client.errors import PurgatoryError, UnavailableError

if TYPE_CHECKING:  # _base imports this module for new_operation_id
    from purgatory_client._base import ResumePolicy

__all__ = ["SERVICE_CONFIG", "LongPollRetry", "channel_options", "new_operation_id"]

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


def channel_options(options: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``options`` plus the retry policy's service config, unless the caller set one."""
    out = list(options)
    if not any(name == "grpc.service_config" for name, _ in out):
        out.append(("grpc.service_config", SERVICE_CONFIG))
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


class LongPollRetry:
    """When a long-poll (``wait=True``) refused with UNAVAILABLE is re-sent, and with
    what deadline.

    The request is re-sent unchanged: it carries an operation id (the caller's, or one
    :func:`new_operation_id` made), so the server answers a re-send with the operation it
    already has, waiting on it if it is still pending or returning its outcome if it
    ended meanwhile (a durable purgatory keeps both across a restart). Up to the client's
    ``resume`` policy (attempts in a row, doubling delays) and within the caller's
    ``timeout``, which bounds the whole long-poll, re-sends included.

    Not thread-safe: one per long-poll call.
    """

    __slots__ = ("_deadline", "_failures", "_policy")

    def __init__(self, policy: ResumePolicy, timeout: float | None) -> None:
        self._policy = policy
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._failures = 0

    def remaining(self) -> float | None:
        """The next attempt's deadline in seconds (None: none)."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def delay(self, error: PurgatoryError) -> float:
        """Seconds to wait before re-sending; re-raises ``error`` if it will not help."""
        if not isinstance(error, UnavailableError) or self._policy.exhausted(self._failures):
            raise error
        delay = self._policy.delay_s(self._failures)
        if self._deadline is not None and time.monotonic() + delay >= self._deadline:
            raise error
        self._failures += 1
        return delay
