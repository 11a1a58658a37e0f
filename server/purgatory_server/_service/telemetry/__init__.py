"""What the service counts as it runs, in plain Python (standard library only).

- ``histogram``: the hot path's lock-free bucket counts;
- ``counters``: what each purgatory counts;
- ``streams``: the server's Session stream figures;
- ``context``: the call's traceparent, and the log filter that puts it on log lines.

Exporting these (OpenTelemetry, Prometheus) is :mod:`purgatory_server._service.observability`.
"""

from purgatory_server._service.telemetry.context import TraceLogFilter, current_traceparent
from purgatory_server._service.telemetry.counters import PurgatoryMetrics

__all__ = ["PurgatoryMetrics", "TraceLogFilter", "current_traceparent"]
