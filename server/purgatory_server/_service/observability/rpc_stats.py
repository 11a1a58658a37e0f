"""Call durations per RPC method and status code, kept for the metrics exporters.

The edge's method wrapper (``api.rpc_telemetry``) records into it; status codes are
their names (``"OK"``, ``"NOT_FOUND"``), so nothing here depends on grpc. Thread safety:
the loop thread writes, an exporter thread reads copies of the tables.
"""

from __future__ import annotations

import time

from purgatory_server._service.telemetry.histogram import DURATION_BOUNDS, Histogram

__all__ = ["CodeTable", "RpcStats"]

# A caller that went away (CANCELLED) was not refused.
_NOT_REJECTED = frozenset({"OK", "CANCELLED"})

CodeTable = dict[str, Histogram]


class RpcStats:
    """Call durations per method and status code (loop thread writes)."""

    def __init__(self) -> None:
        self.started_ns = time.time_ns()
        self._methods: dict[str, CodeTable] = {}

    def table(self, method: str) -> CodeTable:
        """The method's table, with its OK histogram made in advance."""
        table = self._methods.setdefault(method, {})
        table.setdefault("OK", Histogram(DURATION_BOUNDS))
        return table

    def durations(self) -> list[tuple[dict[str, str], Histogram]]:
        out = []
        for method, table in list(self._methods.items()):
            for code, hist in list(table.items()):
                attrs = {
                    "rpc.system.name": "grpc",
                    "rpc.method": method,
                    "rpc.response.status_code": code,
                }
                out.append((attrs, hist))
        return out

    def rejected(self) -> list[tuple[str, str, int]]:
        """(method, status code name, count) for every status the server answered other
        than OK; CANCELLED (the caller went away) is not a rejection."""
        return [
            (method, code, hist.snapshot().total)
            for method, table in list(self._methods.items())
            for code, hist in list(table.items())
            if code not in _NOT_REJECTED
        ]
