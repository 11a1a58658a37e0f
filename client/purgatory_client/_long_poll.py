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

__all__ = ["SERVICE_CONFIG", "channel_options", "new_operation_id"]

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
