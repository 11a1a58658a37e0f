"""Observability: metrics, traces and log correlation (docs/observability.md).

Module map: ``histogram`` (the hot path's lock-free bucket counts), ``counters`` (what
each purgatory counts), ``streams`` (the server's Session stream figures), ``context``
(the call's traceparent and the log filter) and ``loader`` (builds telemetry on demand)
need nothing beyond the standard library; ``metrics`` (the OpenTelemetry instruments),
``operator_metrics`` (process, build, budget, streams, groups, schedules) and ``setup``
(providers, readers, exporters) need the ``observability`` extra and are imported only
when the configuration asks for observability. RPC metrics and spans wrap each method at the edge
(:mod:`purgatory_server._service.api.rpc_telemetry`).
"""

from purgatory_server._service.telemetry.context import TraceLogFilter, current_traceparent
from purgatory_server._service.telemetry.counters import PurgatoryMetrics
from purgatory_server._service.telemetry.loader import available, telemetry_from_config

__all__ = [
    "PurgatoryMetrics",
    "TraceLogFilter",
    "available",
    "current_traceparent",
    "telemetry_from_config",
]
