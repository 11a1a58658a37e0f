"""Trace context for the Python clients (OpenTelemetry, when it is installed).

Every call the clients make carries the caller's current OpenTelemetry context as W3C
``traceparent``/``tracestate`` request metadata, so the server's span for the call is a
child of the caller's span. Without ``opentelemetry-api`` installed nothing is added.

The other direction: an outcome (``OperationStatus.traceparent``,
``Event.traceparent``) carries the traceparent of the request that *registered* the
operation, when the server traces. A consumer links its own span to it with
:func:`span_link`::

    with tracer.start_as_current_span("handle", links=[span_link(event.traceparent)]):
        ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the observability extra is optional: propagate nothing
    propagate = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.trace import Link

__all__ = ["span_link", "trace_metadata", "with_trace"]

Metadata = tuple[tuple[str, str], ...]


def trace_metadata() -> Metadata | None:
    """The current context as gRPC metadata, or None (no OpenTelemetry, or no span)."""
    if propagate is None:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(carrier.items()) or None


def with_trace(metadata: Metadata) -> Metadata:
    """``metadata`` (e.g. the authorization header) plus the current trace context."""
    trace_context = trace_metadata()
    return metadata + trace_context if trace_context else metadata


def span_link(traceparent: str) -> Link | None:
    """An OpenTelemetry ``Link`` to the span a traceparent names (None if empty/invalid)."""
    if propagate is None or not traceparent:
        return None
    context = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    span_context = trace.get_current_span(context).get_span_context()
    if not span_context.is_valid:
        return None
    return trace.Link(span_context)
