"""The RPC edge of observability: RPC metrics and a server span per call.

Each method's handler is wrapped once, at assembly (:func:`wrap_method`, outside the
edge, so calls the edge refuses are measured and traced too), not intercepted per call:
an interceptor costs a coroutine and a handler lookup per RPC. Each method records into
a table bound in advance (status code -> :class:`~.histogram.Histogram`; nothing
allocated per call); rejected requests are its entries other than OK and CANCELLED. Every
RPC the edge registers is covered; health and reflection are not.

With tracing on, each call also gets a SERVER span named after the method, its parent
from the request's W3C ``traceparent``, status ERROR only for server-side codes
(OpenTelemetry's gRPC rule). Its traceparent is :data:`~.context.TRACEPARENT` for the
call (operations it registers and log lines carry it) and it is the current span.

Thread safety: everything runs on the server's event loop; exporters read snapshots.
This module imports OpenTelemetry: only :mod:`.setup` imports it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode, Tracer

from purgatory_server._service.observability.rpc_stats import CodeTable, RpcStats
from purgatory_server._service.telemetry.context import TRACEPARENT
from purgatory_server._service.telemetry.histogram import DURATION_BOUNDS, Histogram

__all__ = ["wrap_method"]

_OK = grpc.StatusCode.OK
_CANCELLED = grpc.StatusCode.CANCELLED
_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}
# Codes that mean the server failed (OpenTelemetry's gRPC server span status rule).
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)

# Methods whose request names the purgatory in ``name`` (the others: ``purgatory``).
_NAMED_BY_NAME = frozenset({"CreatePurgatory", "DeletePurgatory", "GetPurgatory"})


def _final_code(context: Any, exc: BaseException | None) -> grpc.StatusCode:
    """The status the call ends with: set on the context (abort) or implied by ``exc``."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if code is not None:  # grpc.aio may report the raw integer of the code
        return _BY_VALUE.get(code, grpc.StatusCode.UNKNOWN)
    if exc is None:
        return _OK
    if type(exc).__name__ == "CancelledError":
        return _CANCELLED
    return grpc.StatusCode.UNKNOWN


class _Method:
    """What one wrapped method needs: its name, its code table, the tracer."""

    __slots__ = ("name", "ok", "purgatory_field", "table", "tracer")

    def __init__(self, name: str, stats: RpcStats | None, tracer: Tracer | None) -> None:
        self.name = name
        # The request field naming the purgatory: ``name`` on the purgatory admin calls.
        method = name.rpartition("/")[2]
        self.purgatory_field = "name" if method in _NAMED_BY_NAME else "purgatory"
        self.table: CodeTable | None = stats.table(name) if stats is not None else None
        self.ok = self.table["OK"] if self.table is not None else None
        self.tracer = tracer

    def record(self, context: Any, started: float, exc: BaseException | None) -> str:
        name: str = _final_code(context, exc).name
        table = self.table
        if table is not None:
            hist = table.get(name)
            if hist is None:
                hist = table[name] = Histogram(DURATION_BOUNDS)
            hist.record(time.perf_counter() - started)
        return name

    def begin_span(self, context: Any, request: Any = None) -> tuple[Any, object, object]:
        """Start the call's span: (span, OpenTelemetry context token, traceparent token).

        The span carries ``purgatory.name`` when the request names one (a stream of
        requests, Session, names one per frame: none on its span).
        """
        tracer = self.tracer
        assert tracer is not None
        carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        parent = propagate.extract(carrier)
        attributes = {"rpc.system.name": "grpc", "rpc.method": self.name}
        purgatory = getattr(request, self.purgatory_field, None)
        if isinstance(purgatory, str) and purgatory:
            attributes["purgatory.name"] = purgatory[:100]
        span = tracer.start_span(
            self.name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes
        )
        sc = span.get_span_context()
        traceparent = f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return span, token, TRACEPARENT.set(traceparent)

    def end_span(self, state: tuple[Any, Any, Any], code: str) -> None:
        span, token, tp_token = state
        span.set_attribute("rpc.response.status_code", code)
        if grpc.StatusCode[code] in _SERVER_ERRORS:
            span.set_status(Status(StatusCode.ERROR, code))
        span.end()
        otel_context.detach(token)
        TRACEPARENT.reset(tp_token)


def _unary_metrics(m: _Method, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Metrics only: the cheapest wrapper (the common, successful call records into the
    method's OK histogram without looking anything up)."""
    ok = m.ok
    assert ok is not None
    perf_counter = time.perf_counter

    async def unary(request: Any, context: Any) -> Any:
        started = perf_counter()
        try:
            response = await behavior(request, context)
        except BaseException as exc:
            m.record(context, started, exc)
            raise
        if context.code() is None:
            ok.record(perf_counter() - started)
        else:
            m.record(context, started, None)
        return response

    return unary


def _unary_traced(m: _Method, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def unary(request: Any, context: Any) -> Any:
        started = time.perf_counter()
        state = m.begin_span(context, request)
        exc: BaseException | None = None
        try:
            return await behavior(request, context)
        except BaseException as error:
            exc = error
            raise
        finally:
            m.end_span(state, m.record(context, started, exc))

    return unary


def _streaming(m: _Method, behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
        started = time.perf_counter()
        state = m.begin_span(context, request) if m.tracer is not None else None
        exc: BaseException | None = None
        try:
            async for item in behavior(request, context):
                yield item
        except BaseException as error:
            exc = error
            raise
        finally:
            code = m.record(context, started, exc)
            if state is not None:
                m.end_span(state, code)

    return stream


def wrap_method(
    name: str,
    server_streaming: bool,
    handler: Callable[..., Any],
    stats: RpcStats | None,
    tracer: Tracer | None,
) -> Callable[..., Any]:
    """``handler`` (of method ``name``, e.g. ``purgatory.v1.PurgatoryService/GetOperation``)
    measured into ``stats`` and traced by ``tracer``; ``handler`` itself if neither."""
    if stats is None and tracer is None:
        return handler
    m = _Method(name, stats, tracer)
    if server_streaming:
        return _streaming(m, handler)
    if tracer is None:
        return _unary_metrics(m, handler)
    return _unary_traced(m, handler)
