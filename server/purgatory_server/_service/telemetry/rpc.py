"""The RPC edge of observability: a grpc.aio interceptor for RPC metrics and server spans.

Per call, with metrics on: two clock reads and one :class:`~.histogram.Histogram` record
into a table found without allocating (method -> status code -> histogram; the
per-method table is bound once, when the method's handler is first wrapped). Rejected
requests are the entries of the same table other than OK and CANCELLED (the caller
left), so no second counter is kept.

With tracing on, each call also gets a SERVER span named after the method, its parent
taken from the request's W3C ``traceparent`` metadata, its status code recorded as
``rpc.response.status_code``. The span's own traceparent is put in
:data:`~.context.TRACEPARENT` for the call, so operations it registers carry it (and
log lines written meanwhile show it) and OpenTelemetry's current span is set, so spans
started inside the call are its children.

Thread safety: everything runs on the server's event loop; readers take snapshots.
This module imports OpenTelemetry: only :mod:`.setup` imports it, once it knows the
``observability`` extra is installed.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from purgatory_server._service.telemetry.context import TRACEPARENT
from purgatory_server._service.telemetry.histogram import DURATION_BOUNDS, Histogram

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["RpcStats", "TelemetryInterceptor"]

_OK = grpc.StatusCode.OK
_CANCELLED = grpc.StatusCode.CANCELLED
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

CodeTable = dict[grpc.StatusCode, Histogram]


class RpcStats:
    """Call durations per method and status code (loop thread writes)."""

    def __init__(self) -> None:
        self.started_ns = time.time_ns()
        self._methods: dict[str, CodeTable] = {}

    def table(self, method: str) -> CodeTable:
        return self._methods.setdefault(method, {})

    def durations(self) -> list[tuple[dict[str, str], Histogram]]:
        out = []
        for method, table in list(self._methods.items()):
            for code, hist in list(table.items()):
                attrs = {
                    "rpc.system.name": "grpc",
                    "rpc.method": method,
                    "rpc.response.status_code": code.name,
                }
                out.append((attrs, hist))
        return out

    def rejected(self) -> list[tuple[str, str, int]]:
        """(method, status code name, count) for every status the server answered other
        than OK; CANCELLED (the caller went away) is not a rejection."""
        return [
            (method, code.name, sum(hist.snapshot().bucket_counts))
            for method, table in list(self._methods.items())
            for code, hist in list(table.items())
            if code is not _OK and code is not _CANCELLED
        ]


def _final_code(context: Any, exc: BaseException | None) -> grpc.StatusCode:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if code is not None:  # grpc.aio may report the raw integer of the code
        for candidate in grpc.StatusCode:
            if candidate.value[0] == code:
                return candidate
    if exc is None:
        return _OK
    if isinstance(exc, BaseException) and type(exc).__name__ == "CancelledError":
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


class _Call:
    """What one wrapped method needs: its name, its code table, the tracer."""

    __slots__ = ("method", "name", "table", "tracer")

    def __init__(self, method: str, table: CodeTable | None, tracer: Tracer | None) -> None:
        self.method = method
        self.name = method.lstrip("/")
        self.table = table
        self.tracer = tracer

    def begin(self, context: Any) -> tuple[Any, Any, Any]:
        """Start the span (if tracing): (span, otel context token, traceparent token)."""
        tracer = self.tracer
        assert tracer is not None
        carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        parent = propagate.extract(carrier)
        span = tracer.start_span(
            self.name,
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={"rpc.system.name": "grpc", "rpc.method": self.name},
        )
        sc = span.get_span_context()
        flags = int(sc.trace_flags)
        traceparent = f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{flags:02x}"
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return span, token, TRACEPARENT.set(traceparent)

    def end(
        self,
        context: Any,
        started: float,
        exc: BaseException | None,
        span_state: tuple[Any, Any, Any] | None,
    ) -> None:
        code = _final_code(context, exc)
        table = self.table
        if table is not None:
            hist = table.get(code)
            if hist is None:
                hist = table[code] = Histogram(DURATION_BOUNDS)
            hist.record(time.perf_counter() - started)
        if span_state is not None:
            span, token, tp_token = span_state
            span.set_attribute("rpc.response.status_code", code.name)
            if code in _SERVER_ERRORS:
                span.set_status(Status(StatusCode.ERROR, code.name))
            span.end()
            otel_context.detach(token)
            TRACEPARENT.reset(tp_token)


def _wrap_unary(call: _Call, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def unary(request: Any, context: Any) -> Any:
        started = time.perf_counter()
        state = call.begin(context) if call.tracer is not None else None
        exc: BaseException | None = None
        try:
            return await behavior(request, context)
        except BaseException as error:
            exc = error
            raise
        finally:
            call.end(context, started, exc, state)

    return unary


def _wrap_stream(call: _Call, behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
        started = time.perf_counter()
        state = call.begin(context) if call.tracer is not None else None
        exc: BaseException | None = None
        try:
            async for item in behavior(request, context):
                yield item
        except BaseException as error:
            exc = error
            raise
        finally:
            call.end(context, started, exc, state)

    return stream


class TelemetryInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every method handler once (cached per method) with :class:`_Call`."""

    def __init__(self, stats: RpcStats | None, tracer: Tracer | None) -> None:
        self._stats = stats
        self._tracer = tracer
        self._cache: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        cached = self._cache.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(method, handler)
        self._cache[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: Any) -> Any:
        if handler is None:
            return None
        call = _Call(method, None, self._tracer)
        if self._stats is not None:
            call.table = self._stats.table(call.name)
        kw = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(_wrap_unary(call, handler.unary_unary), **kw)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                _wrap_unary(call, handler.stream_unary), **kw
            )
        if handler.unary_stream is not None and inspect.isasyncgenfunction(
            inspect.unwrap(handler.unary_stream)
        ):
            return grpc.unary_stream_rpc_method_handler(
                _wrap_stream(call, handler.unary_stream), **kw
            )
        if handler.stream_stream is not None and inspect.isasyncgenfunction(
            inspect.unwrap(handler.stream_stream)
        ):
            return grpc.stream_stream_rpc_method_handler(
                _wrap_stream(call, handler.stream_stream), **kw
            )
        return handler  # a streaming handler that writes through the context: as is
