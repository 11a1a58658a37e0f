"""The console under TLS: HTTPS with the server's certificate (a client certificate
required under mutual TLS, as on the gRPC port), a Secure cookie, and its pages still
served (the console reaches its server on a private socket, whatever the TLS)."""

from __future__ import annotations

import http.client
import re
import ssl
from dataclasses import replace
from urllib.parse import urlencode

import pytest
from purgatory_server._service.config.auth import parse_auth

from tests.security.certs import CertFiles
from tests.security.conftest import tls_config
from tests.service.helpers import TEST_CONFIG, ServerThread

TOKEN = "console-tls-admin-token"
AUTH = parse_auth({"tokens": [{"name": "ops", "token": TOKEN, "permissions": ["admin"]}]}, {})


def _context(certs: CertFiles, client: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if client:
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


def _request(
    port: int, context: ssl.SSLContext, method: str, path: str, **kw: object
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.request(method, path, **kw)  # type: ignore[arg-type]
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def _sign_in_and_list(port: int, context: ssl.SSLContext) -> str:
    status, headers, body = _request(port, context, "GET", "/login")
    assert status == 200
    cookie = headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    match = re.search(r'name="csrf" value="([^"]+)"', body)
    assert match is not None
    status, headers, _ = _request(
        port,
        context,
        "POST",
        "/login",
        body=urlencode({"csrf": match.group(1), "token": TOKEN}),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": cookie.split(";")[0],
            "Origin": f"https://localhost:{port}",
        },
    )
    assert status == 303, headers
    signed = headers["Set-Cookie"].split(";")[0]
    status, _, body = _request(port, context, "GET", "/", headers={"Cookie": signed})
    assert status == 200
    return body


def test_the_console_is_https_with_the_servers_certificate(certs: CertFiles) -> None:
    config = replace(tls_config(TEST_CONFIG, certs), auth=AUTH, console_listen="127.0.0.1:0")
    with ServerThread(config) as server:
        assert server.server is not None and server.server.console is not None
        port = server.server.console.port
        assert 'href="/p/default"' in _sign_in_and_list(port, _context(certs))
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            plain.request("GET", "/login")  # no plaintext beside it
            plain.getresponse()
        plain.close()


def test_the_console_requires_a_client_certificate_under_mutual_tls(certs: CertFiles) -> None:
    config = replace(
        tls_config(TEST_CONFIG, certs, mutual=True), auth=AUTH, console_listen="127.0.0.1:0"
    )
    with ServerThread(config) as server:
        assert server.server is not None and server.server.console is not None
        port = server.server.console.port
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _request(port, _context(certs), "GET", "/login")
        assert 'href="/p/default"' in _sign_in_and_list(port, _context(certs, client=True))
