"""Spans through the in-memory span exporter: one per RPC, parented by the caller's
context, and outcomes that carry (and link back to) the registering request's span."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from purgatory_client import (
    AsyncPurgatoryClient,
    NotFoundError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
)
from purgatory_client.tracing import span_link
from purgatory_server._service import create_server
from purgatory_server._service.observability.setup import Telemetry
from purgatory_server._service.telemetry import TraceLogFilter

from tests.service.helpers import TEST_CONFIG, ServerThread, until, until_subscribers

SERVICE = "purgatory.v1.PurgatoryService/"

# The test's own "client application" tracer; not the global provider (nothing global).
client_tracer = TracerProvider().get_tracer("test-client")


def traceparent(span: ReadableSpan) -> str:
    sc = span.get_span_context()
    assert sc is not None
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


@pytest.fixture
async def traced_server() -> AsyncIterator[tuple[Any, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(span_processors=[SimpleSpanProcessor(exporter)])
    server, _ = await create_server("127.0.0.1:0", TEST_CONFIG, telemetry=telemetry)
    try:
        yield server, exporter
    finally:
        await server.stop(0.5)


@pytest.fixture
async def traced(
    traced_server: tuple[Any, InMemorySpanExporter],
) -> AsyncIterator[tuple[AsyncPurgatoryClient, InMemorySpanExporter]]:
    server, exporter = traced_server
    async with AsyncPurgatoryClient(f"127.0.0.1:{server.port}", timeout=10) as client:
        yield client, exporter


async def finished_spans(exporter: InMemorySpanExporter, n: int) -> tuple[ReadableSpan, ...]:
    """The finished spans once there are ``n``: the server ends an RPC's span after it has
    sent the answer, so the client can see the answer a moment before the span ends."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while len(exporter.get_finished_spans()) < n and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return exporter.get_finished_spans()


def server_spans(exporter: InMemorySpanExporter, method: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == SERVICE + method]


async def test_one_server_span_per_rpc_with_its_status(traced: Any) -> None:
    client, exporter = traced
    await client.try_complete_else_watch(["a"], 60_000, operation_id="op")
    await client.check_and_complete("a")
    await client.check_and_complete("a")
    with pytest.raises(NotFoundError):
        await client.get_operation("missing")
    spans = await finished_spans(exporter, 4)
    names = sorted(s.name.removeprefix(SERVICE) for s in spans)
    assert names == ["CheckAndComplete", "CheckAndComplete", "GetOperation", "TryCompleteElseWatch"]
    for span in spans:
        assert span.kind is SpanKind.SERVER
        assert span.attributes is not None and span.attributes["rpc.system.name"] == "grpc"
        # Which purgatory the call was about (the client names "default").
        assert span.attributes["purgatory.name"] == "default"
    (failed,) = server_spans(exporter, "GetOperation")
    assert failed.attributes is not None
    assert failed.attributes["rpc.response.status_code"] == "NOT_FOUND"
    # A caller's mistake is not the server's error (OpenTelemetry's gRPC server rule).
    assert failed.status.status_code is StatusCode.UNSET
    ok = server_spans(exporter, "TryCompleteElseWatch")[0]
    assert ok.attributes is not None and ok.attributes["rpc.response.status_code"] == "OK"
    # Without a client span the server starts a new trace.
    assert ok.parent is None


async def test_client_context_propagates_to_the_server_span(traced: Any) -> None:
    client, exporter = traced
    with client_tracer.start_as_current_span("caller") as caller:
        await client.list_purgatories()
    (span,) = server_spans(exporter, "ListPurgatories")
    caller_ctx = caller.get_span_context()
    assert span.parent is not None
    assert span.parent.span_id == caller_ctx.span_id
    assert span.context is not None and span.context.trace_id == caller_ctx.trace_id


async def test_outcomes_carry_the_registering_span(traced: Any, traced_server: Any) -> None:
    client, exporter = traced
    feed = traced_server[0].registry.get("default").feed
    stream = client.subscribe()
    first = asyncio.ensure_future(anext(stream))
    await until_subscribers(client, 1)  # the stream is open before anything ends
    with client_tracer.start_as_current_span("producer") as producer:
        registered = await client.try_complete_else_watch(["k"], 60_000, operation_id="op")
    poll = asyncio.ensure_future(client.wait(["k"], 60_000, operation_id="op"))

    async def parked() -> bool:  # the re-sent long-poll waits before the signal
        return feed.waiting("op") == 1

    await until(parked)
    await client.check_and_complete("k")
    event = await asyncio.wait_for(first, 10)
    answered = await asyncio.wait_for(poll, 10)
    await stream.aclose()

    (registration,) = [
        s
        for s in server_spans(exporter, "TryCompleteElseWatch")
        if s.parent is not None and s.parent.span_id == producer.get_span_context().span_id
    ]
    expected = traceparent(registration)
    assert registered.traceparent == expected  # a WATCHING status carries it too
    assert event.traceparent == expected
    # The re-sent long-poll (another request) reports the registering request's span.
    assert answered.traceparent == expected
    assert (await client.get_operation("op")).traceparent == expected

    # A consumer links its span to the producer's registration.
    link = span_link(event.traceparent)
    assert link is not None
    with client_tracer.start_as_current_span("consumer", links=[link]) as consumer:
        pass
    assert consumer.links[0].context.span_id == registration.context.span_id  # type: ignore[attr-defined,union-attr]
    assert consumer.links[0].context.trace_id == producer.get_span_context().trace_id  # type: ignore[attr-defined]
    assert span_link("") is None


async def test_session_outcomes_and_watching_statuses_carry_the_registering_span(
    traced: Any,
) -> None:
    client, _ = traced
    with client_tracer.start_as_current_span("producer") as producer:
        session = client.session()  # the Session call's context: the producer's trace
        ack = await session.send(watches=[OperationSpec(("k",), 60_000, operation_id="s-op")])
    (status,) = ack.operations
    producer_trace = f"{producer.get_span_context().trace_id:032x}"
    assert status.state is OperationState.WATCHING
    assert status.traceparent.startswith(f"00-{producer_trace}-")
    watching = await client.get_operation("s-op")
    assert (watching.state, watching.traceparent) == (OperationState.WATCHING, status.traceparent)
    await client.check_and_complete("k")
    event = await asyncio.wait_for(anext(session.outcomes()), 10)
    await session.close()
    assert (event.operation_id, event.traceparent) == ("s-op", status.traceparent)


async def test_log_lines_inside_a_call_carry_its_trace(traced: Any) -> None:
    client, exporter = traced
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Capture()
    handler.addFilter(TraceLogFilter())
    log = logging.getLogger("purgatory_server.service")
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        await client.create_purgatory("doomed")  # logs "purgatory doomed created" (untraced)
        created = len(records)
        with client_tracer.start_as_current_span("admin"):
            await client.delete_purgatory("doomed")  # logs "purgatory doomed stopped ..."
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
    (span,) = server_spans(exporter, "DeletePurgatory")
    stopped = [r for r in records[created:] if "doomed" in r.getMessage()]
    assert stopped, [r.getMessage() for r in records]
    assert span.context is not None
    assert {(r.trace_id, r.span_id) for r in stopped} == {  # type: ignore[attr-defined]
        (f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")
    }


def test_sync_client_and_tracing_flag_carry_context_end_to_end() -> None:
    """``tracing = true`` in the configuration (no exporter) and the blocking client."""
    with (
        ServerThread(replace(TEST_CONFIG, tracing=True)) as st,
        PurgatoryClient(st.target, timeout=10) as client,
    ):
        with client_tracer.start_as_current_span("sync caller") as caller:
            client.try_complete_else_watch(["s"], 60_000, operation_id="sync-op")
        result = client.force_complete("sync-op")
        events = client.subscribe(after_sequence=0)
        event = next(events)
        events.close()
    caller_trace = f"{caller.get_span_context().trace_id:032x}"
    status = result.operation
    assert status.traceparent.startswith(f"00-{caller_trace}-")
    assert event.traceparent == status.traceparent
    link = span_link(status.traceparent)
    assert link is not None and link.context.trace_id == caller.get_span_context().trace_id
