"""Assembling observability for one server: providers, readers, exporters, RPC wrapper.

:class:`Telemetry` is what the server holds; its providers are its own, not
OpenTelemetry's global ones, so two servers in one process never mix their figures.
:func:`instrument` runs once both it and the registry exist, so nothing reads a
half-built object.

Imports OpenTelemetry: the server reaches it only through
:func:`.loader.telemetry_from_config`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry, start_http_server

from purgatory_server._service.config.server_config import ConfigError, ServerConfig
from purgatory_server._service.observability.metrics import (
    SCOPE,
    histogram_metrics,
    register_instruments,
)
from purgatory_server._service.observability.operator_metrics import register_operator_instruments
from purgatory_server._service.observability.readers import PeriodicReader, PrometheusReader, Reader
from purgatory_server._service.observability.rpc_stats import RpcStats

if TYPE_CHECKING:
    from purgatory_server._service.core.registry import PurgatoryRegistry

__all__ = ["Telemetry", "build_telemetry", "instrument"]

logger = logging.getLogger("purgatory_server.telemetry")


class Telemetry:
    """One server's metrics and tracing (:func:`instrument` adds the registry's figures)."""

    def __init__(
        self,
        *,
        metric_readers: Sequence[Reader] = (),
        span_processors: Sequence[SpanProcessor] = (),
        tracing: bool = False,
        service_name: str = "purgatory-server",
    ) -> None:
        resource = Resource.create({"service.name": service_name})
        self.metrics = bool(metric_readers)
        self.tracing = tracing or bool(span_processors)
        self.readers = tuple(metric_readers)
        self._meter_provider = MeterProvider(metric_readers=self.readers, resource=resource)
        self.meter = self._meter_provider.get_meter(SCOPE)
        self._tracer_provider: TracerProvider | None = None
        self.tracer: Tracer | None = None
        if self.tracing:
            self._tracer_provider = TracerProvider(resource=resource)
            for processor in span_processors:
                self._tracer_provider.add_span_processor(processor)
            self.tracer = self._tracer_provider.get_tracer("purgatory_server")
        self.rpc: RpcStats | None = RpcStats() if self.metrics else None
        self.metrics_port = 0  # the Prometheus endpoint's bound port, once started
        self._http: tuple[Any, Any] | None = None

    def serve_prometheus(
        self,
        address: str,
        registry: CollectorRegistry,
        *,
        tls_cert: str = "",
        tls_key: str = "",
        tls_client_ca: str = "",
    ) -> int:
        """Serve ``registry`` at http(s)://``address``/metrics (own thread); the bound port.

        With ``tls_cert``/``tls_key`` it is HTTPS, and with ``tls_client_ca`` the scraper
        must present a certificate that CA signed.
        """
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"metrics_listen must be host:port, got {address!r}")
        tls: dict[str, Any] = {}
        if tls_cert and tls_key:
            tls = {"certfile": tls_cert, "keyfile": tls_key}
            if tls_client_ca:
                tls |= {"client_cafile": tls_client_ca, "client_auth_required": True}
        try:
            server, thread = start_http_server(
                int(port), host.strip("[]"), registry=registry, **tls
            )
        except OSError as exc:
            raise OSError(f"cannot serve metrics on {address}: {exc.strerror or exc}") from exc
        self._http = (server, thread)
        self.metrics_port = int(server.server_port)
        return self.metrics_port

    def flush(self) -> None:
        """Export what is pending now (blocking): called while the purgatories still
        exist, so the last figures reach OTLP before the server takes them down."""
        if self._tracer_provider is not None:
            self._tracer_provider.force_flush()
        self._meter_provider.force_flush()

    def shutdown(self) -> None:
        """Stop the endpoint, flush exporters (blocking: call from a worker thread)."""
        if self._http is not None:
            server, thread = self._http
            self._http = None
            server.shutdown()
            server.server_close()
            thread.join(5)
        if self._tracer_provider is not None:
            self._tracer_provider.shutdown()
        self._meter_provider.shutdown()


def build_telemetry(config: ServerConfig) -> Telemetry:
    """The server's telemetry per ``config`` (which asks for some); starts its endpoint."""
    readers: list[Reader] = []
    processors: list[SpanProcessor] = []
    prometheus_registry: CollectorRegistry | None = None
    if config.metrics_listen:
        prometheus_registry = CollectorRegistry()
        readers.append(PrometheusReader(scope_info_enabled=False, registry=prometheus_registry))
    if config.otlp_endpoint:
        endpoint = config.otlp_endpoint
        insecure = not endpoint.startswith("https://")
        readers.append(PeriodicReader(OTLPMetricExporter(endpoint=endpoint, insecure=insecure)))
        processors.append(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=insecure))
        )
    telemetry = Telemetry(
        metric_readers=readers, span_processors=processors, tracing=config.tracing
    )
    if prometheus_registry is not None:
        try:
            telemetry.serve_prometheus(
                config.metrics_listen,
                prometheus_registry,
                tls_cert=config.tls_cert,
                tls_key=config.tls_key,
                tls_client_ca=config.tls_client_ca,
            )
        except BaseException:
            telemetry.shutdown()
            raise
        https = bool(config.tls_cert and config.tls_key)
        logger.info(
            "metrics: %s://%s:%d/metrics%s",
            "https" if https else "http",
            config.metrics_listen.rpartition(":")[0],
            telemetry.metrics_port,
            " (client certificate required)" if https and config.tls_client_ca else "",
        )
    return telemetry


def instrument(telemetry: Telemetry, registry: PurgatoryRegistry) -> None:
    """Register ``telemetry``'s instruments over ``registry`` (its purgatories, budget and
    streams), and give its readers the histograms: once, when the server is assembled."""
    rpc = telemetry.rpc
    if rpc is None:  # no metric reader: nothing to register
        return
    register_instruments(telemetry.meter, registry.snapshot, rpc, registry.budget)
    register_operator_instruments(telemetry.meter, registry)
    for reader in telemetry.readers:
        reader.histograms.add(lambda: histogram_metrics(registry.snapshot, rpc))
