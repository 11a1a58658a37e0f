"""Observability on demand: the OpenTelemetry packages are an optional extra.

The server imports only this module (standard library only). :func:`telemetry_from_config`
imports :mod:`.setup` only when the configuration asks for observability; without the
extra that fails at start-up with one line naming it.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from purgatory_server._service.config.server_config import ConfigError, ServerConfig

if TYPE_CHECKING:
    from purgatory_server._service.observability.setup import Telemetry

__all__ = ["EXTRA_HINT", "available", "telemetry_from_config"]

EXTRA_HINT = "install the observability extra: pip install 'purgatory-grpc[observability]'"


def _importable(name: str) -> bool:
    """Whether ``name`` can be imported; False too when a parent package is missing.

    ``find_spec("a.b")`` imports ``a`` first and raises ModuleNotFoundError when there is
    no ``a`` at all (the usual case without the extra: no ``opentelemetry`` package).
    """
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def available() -> bool:
    """True when the OpenTelemetry SDK and exporters (the ``observability`` extra) are."""
    return all(
        _importable(name) for name in ("opentelemetry.sdk", "opentelemetry.exporter.prometheus")
    )


def telemetry_from_config(config: ServerConfig) -> Telemetry | None:
    """The server's telemetry per ``config``; None when everything is off."""
    if not (config.metrics_listen or config.otlp_endpoint or config.tracing):
        return None
    if not available():
        raise ConfigError(
            "metrics_listen, otlp_endpoint and tracing need OpenTelemetry: " + EXTRA_HINT
        )
    setup = importlib.import_module("purgatory_server._service.observability.setup")
    telemetry: Telemetry = setup.build_telemetry(config)
    return telemetry
