"""The Session stream's heartbeat message.

Both server-streaming RPCs can send a heartbeat when they have sent nothing for a
client-chosen interval (``SubscribeRequest.heartbeat_interval_ms``,
``SessionRequest.heartbeat_interval_ms``), so that proxies and load balancers never see an
idle stream and clients can tell a silent stream from a dead one. 0 means no heartbeats
(older clients). The interval's bounds are checked with every other field in
:func:`purgatory_server._service.wire.validation.heartbeat_interval`.
"""

from __future__ import annotations

import time

from purgatory_proto.v1 import purgatory_pb2 as pb

__all__ = ["session_heartbeat"]


def session_heartbeat() -> pb.SessionResponse:
    """A Session heartbeat, stamped with the server's wall clock (epoch ms)."""
    return pb.SessionResponse(heartbeat=True, server_time_ms=time.time_ns() // 1_000_000)
