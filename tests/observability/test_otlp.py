"""``--otlp-endpoint``: spans and metrics reach an OTLP/gRPC receiver on loopback.

The receiver is a minimal OTLP collector (the two Export services from
``opentelemetry-proto``, which the OTLP exporter itself depends on) that keeps what it
is sent; the server exports to it exactly as it would to an OpenTelemetry Collector.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from purgatory_client import AsyncPurgatoryClient
from purgatory_server._service import create_server

from tests.service.helpers import TEST_CONFIG


class Receiver(
    trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer
):
    def __init__(self) -> None:
        self.spans: list[str] = []
        self.metrics: set[str] = set()

    async def Export(self, request: Any, context: Any) -> Any:
        if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(span.name for span in scope.spans)
            return trace_service_pb2.ExportTraceServiceResponse()
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                self.metrics.update(metric.name for metric in scope.metrics)
        return metrics_service_pb2.ExportMetricsServiceResponse()


async def test_spans_and_metrics_reach_an_otlp_receiver() -> None:
    receiver = Receiver()
    collector = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, collector)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(receiver, collector)
    collector_port = collector.add_insecure_port("127.0.0.1:0")
    await collector.start()
    try:
        config = replace(TEST_CONFIG, otlp_endpoint=f"http://127.0.0.1:{collector_port}")
        server, port = await create_server("127.0.0.1:0", config)
        try:
            async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
                await c.try_complete_else_watch(["k"], 60_000)
                await c.check_and_complete("k")
        finally:
            await server.stop(0.5)  # flushes the span processor and the metric reader
    finally:
        await collector.stop(None)
    assert "purgatory.v1.PurgatoryService/TryCompleteElseWatch" in receiver.spans
    assert "purgatory.v1.PurgatoryService/CheckAndComplete" in receiver.spans
    assert {
        "purgatory.operations.registered",
        "purgatory.operations.delayed",
        "purgatory.operation.wait.duration",
        "rpc.server.call.duration",
    } <= receiver.metrics
