"""Cancel, Reschedule, ListOperations and debounced re-sends in metrics and spans."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from purgatory_client import AsyncPurgatoryClient, FailedPreconditionError
from purgatory_server._engine.time import MockTime
from purgatory_server._service import create_server
from purgatory_server._service.observability.readers import InMemoryReader
from purgatory_server._service.observability.setup import Telemetry

from tests.observability.helpers import collect, point, value
from tests.service.helpers import TEST_CONFIG

SERVICE = "purgatory.v1.PurgatoryService/"
DEFAULT = {"purgatory.name": "default"}


def rpc(method: str, code: str = "OK") -> dict[str, str]:
    return {"rpc.method": SERVICE + method, "rpc.response.status_code": code}


async def test_delayed_message_rpcs_are_measured_and_traced() -> None:
    reader = InMemoryReader()
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(metric_readers=[reader], span_processors=[SimpleSpanProcessor(exporter)])
    # A mock clock: the re-send must come a millisecond after the registration to move the
    # deadline at all (on the real clock both can fall in the same millisecond).
    clock = MockTime()
    server, port = await create_server(
        "127.0.0.1:0", TEST_CONFIG, telemetry=telemetry, time=clock, reaper_enabled=False
    )
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            await c.try_complete_else_watch(["k"], 60_000, operation_id="a")
            await c.try_complete_else_watch(["k"], 60_000, operation_id="b", extend_on_resend=True)
            clock.sleep(1)
            await c.try_complete_else_watch(["k"], 60_000, operation_id="b", extend_on_resend=True)
            await c.reschedule("a", timeout_ms=120_000)
            assert [s.operation_id for s in await c.cancel(["a"])] == ["a"]
            with pytest.raises(FailedPreconditionError):
                await c.reschedule("a", timeout_ms=1_000)
            page = await c.list_operations()
            assert [s.operation_id for s in page.operations] == ["b"]
        m = collect(reader)
        durations = m["rpc.server.call.duration"]
        for method in ("Cancel", "Reschedule", "ListOperations"):
            assert point(durations, rpc(method)).count == 1, method
        assert point(durations, rpc("Reschedule", "FAILED_PRECONDITION")).count == 1
        rejected = rpc("Reschedule", "FAILED_PRECONDITION")
        assert value(m, "purgatory.rpc.rejected", rejected) == 1
        assert value(m, "purgatory.operations.outcomes", {**DEFAULT, "state": "cancelled"}) == 1
        moved = "purgatory.operations.rescheduled"
        assert value(m, moved, {**DEFAULT, "reason": "reschedule"}) == 1
        assert value(m, moved, {**DEFAULT, "reason": "resend"}) == 1
        spans = {s.name: s for s in exporter.get_finished_spans()}
        for method in ("Cancel", "Reschedule", "ListOperations"):
            span = spans[SERVICE + method]
            assert span.attributes is not None
            assert span.attributes["rpc.method"] == SERVICE + method
        failed = [
            s
            for s in exporter.get_finished_spans()
            if s.name == SERVICE + "Reschedule"
            and s.attributes is not None
            and s.attributes.get("rpc.response.status_code") == "FAILED_PRECONDITION"
        ]
        assert len(failed) == 1
    finally:
        await server.stop(0.5)
