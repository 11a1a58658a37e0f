"""The current request's trace context, readable without importing OpenTelemetry.

The RPC wrapper (:mod:`.rpc_telemetry`) sets :data:`TRACEPARENT` for the duration of each
traced call; grpc.aio runs every call in its own task, so the context variable is the
call's own. The purgatory reads it when it registers operations, so each outcome can
carry the W3C ``traceparent`` of the request that registered it.

:class:`TraceLogFilter` puts the same ids on log records (``trace_id``, ``span_id``,
empty outside a traced call), so log lines written inside a request join its trace.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

__all__ = ["TRACEPARENT", "TraceLogFilter", "current_traceparent"]

# "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>" or "" outside a traced call.
TRACEPARENT: ContextVar[str] = ContextVar("purgatory_traceparent", default="")


def current_traceparent() -> str:
    return TRACEPARENT.get()


class TraceLogFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` attributes (possibly empty) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        traceparent = TRACEPARENT.get()
        if traceparent:
            record.trace_id = traceparent[3:35]
            record.span_id = traceparent[36:52]
        else:
            record.trace_id = ""
            record.span_id = ""
        return True
