"""Stream heartbeats: the interval bounds and the Session's heartbeat message.

Both server-streaming RPCs can send a heartbeat when they have sent nothing for a
client-chosen interval (``SubscribeRequest.heartbeat_interval_ms``,
``SessionRequest.heartbeat_interval_ms``), so that proxies and load balancers never see an
idle stream and clients can tell a silent stream from a dead one. 0 means no heartbeats
(older clients); otherwise the interval must lie in [:data:`MIN_HEARTBEAT_MS`,
:data:`MAX_HEARTBEAT_MS`] (INVALID_ARGUMENT naming the field): below, a client could make
the server spin; above, no proxy keeps a connection that long anyway.
"""

from __future__ import annotations

import time
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.errors import InvalidArgument

__all__ = ["MAX_HEARTBEAT_MS", "MIN_HEARTBEAT_MS", "heartbeat_seconds", "session_heartbeat"]

MIN_HEARTBEAT_MS = 100
MAX_HEARTBEAT_MS = 3_600_000


def heartbeat_seconds(field: str, interval_ms: int) -> float | None:
    """The idle interval in seconds (None: no heartbeats); InvalidArgument out of bounds."""
    if not interval_ms:
        return None
    if not MIN_HEARTBEAT_MS <= interval_ms <= MAX_HEARTBEAT_MS:
        raise InvalidArgument(
            field, f"{interval_ms} is outside [{MIN_HEARTBEAT_MS}, {MAX_HEARTBEAT_MS}] ms"
        )
    return interval_ms / 1000


def session_heartbeat() -> Any:
    """A Session heartbeat, stamped with the server's wall clock (epoch ms)."""
    return pb.SessionResponse(heartbeat=True, server_time_ms=time.time_ns() // 1_000_000)
