"""Helpers of the observability tests: reading an in-memory metric reader's data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def collect(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Metric name -> its data points, from one collection."""
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def point(points: list[Any], attrs: Mapping[str, str]) -> Any:
    """The one point whose attributes include ``attrs`` (fails if not exactly one)."""
    found = [p for p in points if _matches(p.attributes, attrs)]
    assert len(found) == 1, f"{len(found)} points match {attrs}: {[p.attributes for p in points]}"
    return found[0]


def value(metrics: dict[str, list[Any]], name: str, attrs: Mapping[str, str]) -> Any:
    """A counter's or gauge's value, or a histogram's count, for ``attrs``."""
    p = point(metrics[name], attrs)
    return p.count if hasattr(p, "bucket_counts") else p.value


def _matches(attributes: Mapping[str, Any] | None, wanted: Mapping[str, str]) -> bool:
    attributes = attributes or {}
    return all(attributes.get(k) == v for k, v in wanted.items())
