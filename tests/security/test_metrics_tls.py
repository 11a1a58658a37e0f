"""The Prometheus endpoint under TLS: with --tls-cert/--tls-key it serves HTTPS with the
same certificate, and with --tls-client-ca it requires a client certificate, like the
gRPC port (docs/service.md "Security")."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import replace

import pytest

from tests.security.certs import CertFiles
from tests.security.conftest import tls_config
from tests.service.helpers import TEST_CONFIG, ServerThread


def _get(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return str(response.read().decode())


def _trusting(certs: CertFiles, client: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if client:
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


def _url(server: ServerThread, scheme: str) -> str:
    assert server.server is not None and server.server.telemetry is not None
    return f"{scheme}://localhost:{server.server.telemetry.metrics_port}/metrics"


def test_metrics_are_https_with_the_servers_certificate(certs: CertFiles) -> None:
    config = replace(tls_config(TEST_CONFIG, certs), metrics_listen="127.0.0.1:0")
    with ServerThread(config) as server:
        body = _get(_url(server, "https"), _trusting(certs))
        assert 'purgatory_operations_delayed{purgatory_name="default"}' in body
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _get(_url(server, "http"))  # no plaintext beside it


def test_metrics_require_a_client_certificate_under_mutual_tls(certs: CertFiles) -> None:
    config = replace(tls_config(TEST_CONFIG, certs, mutual=True), metrics_listen="127.0.0.1:0")
    with ServerThread(config) as server:
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _get(_url(server, "https"), _trusting(certs))
        body = _get(_url(server, "https"), _trusting(certs, client=True))
        assert "purgatory_build_info" in body
