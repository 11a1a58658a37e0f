"""The metric readers the server uses, each adding the service's own histograms.

The SDK has no hook for histograms kept outside it (no observable histogram, no metric
producer) and its synchronous ``record`` is too dear per operation, so each reader here
subclasses an SDK reader, overriding ``_receive_metrics`` as the SDK documents, and adds
the :class:`HistogramFeed`'s metrics to the server's scope in each collection.

Thread safety: ``_receive_metrics`` runs on the collecting thread; the feed's sources
only make GIL-atomic reads of loop-owned state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    Metric,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
    ScopeMetrics,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from purgatory_server._service.observability.metrics import SCOPE

__all__ = ["HistogramFeed", "InMemoryReader", "PeriodicReader", "PrometheusReader", "Reader"]

Source = Callable[[], list[Metric]]


class HistogramFeed:
    """Where a reader finds the histograms to add to each collection: sources added
    once the purgatories they read exist (none before: a collection is left as is)."""

    def __init__(self) -> None:
        self._sources: list[Source] = []

    def add(self, source: Source) -> None:
        self._sources.append(source)

    def splice(self, metrics_data: MetricsData) -> MetricsData:
        """``metrics_data`` with every source's metrics in the server's scope."""
        extra = [metric for source in self._sources for metric in source()]
        if not extra or not metrics_data.resource_metrics:
            return metrics_data
        first, *rest = metrics_data.resource_metrics
        scopes = list(first.scope_metrics)
        for i, scope in enumerate(scopes):
            if scope.scope.name == SCOPE:
                scopes[i] = replace(scope, metrics=[*scope.metrics, *extra])
                break
        else:
            ours = InstrumentationScope(SCOPE)
            scopes.append(ScopeMetrics(scope=ours, metrics=extra, schema_url=""))
        return MetricsData(resource_metrics=[replace(first, scope_metrics=scopes), *rest])


class _Spliced(MetricReader):
    """The override each reader below shares: splice, then receive as the SDK's own
    reader does (the next class in the method order)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.histograms = HistogramFeed()

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        spliced = self.histograms.splice(metrics_data)
        super()._receive_metrics(  # type: ignore[safe-super]  # a concrete reader's
            spliced, timeout_millis=timeout_millis, **kwargs
        )


class PrometheusReader(_Spliced, PrometheusMetricReader):
    """:class:`PrometheusMetricReader` whose collections include ``histograms``."""


class PeriodicReader(_Spliced, PeriodicExportingMetricReader):
    """:class:`PeriodicExportingMetricReader` whose exports include ``histograms``."""


class InMemoryReader(_Spliced, InMemoryMetricReader):
    """:class:`InMemoryMetricReader` (tests, benchmarks) with ``histograms`` too."""


# A reader that :class:`~.setup.Telemetry` accepts: one that takes the histograms.
Reader = PrometheusReader | PeriodicReader | InMemoryReader
