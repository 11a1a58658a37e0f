"""Exporting what the service counts: OpenTelemetry metrics, traces, Prometheus.

- ``loader``: builds the exporters on demand (standard library only; the server imports
  only this module when observability is off);
- ``setup``: providers, readers, exporters and the Prometheus endpoint;
- ``metrics``: the OpenTelemetry instruments over the purgatories' counters;
- ``readers``: the metric readers, each adding the service's own histograms;
- ``operator_metrics``: process, build, budget, streams, groups and schedules;
- ``rpc_stats``: call durations per method and status code, recorded by the edge.

``setup``, ``metrics``, ``readers`` and ``operator_metrics`` need the ``observability``
extra. The counters themselves are kept by the service in
:mod:`purgatory_server._service.telemetry`; the edge's method wrapper is
:mod:`purgatory_server._service.api.rpc_telemetry`.
"""

from purgatory_server._service.observability.loader import available, telemetry_from_config

__all__ = ["available", "telemetry_from_config"]
