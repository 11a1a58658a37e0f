"""The console at the HTTP level, tokens off: its cookie and headers, what it refuses
(malformed or oversized requests, POSTs without a session or CSRF token, names the API
refuses), and that it leaves nothing behind when the server stops."""

from __future__ import annotations

import http.client
import re
import socket
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import urlencode

import pytest
from purgatory_client import OperationState, PurgatoryClient

from tests.service.helpers import TEST_CONFIG, ServerThread

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(replace(TEST_CONFIG, console_listen="127.0.0.1:0")) as st:
        yield st


@pytest.fixture(scope="module")
def port(server: ServerThread) -> int:
    assert server.server is not None and server.server.console is not None
    return server.server.console.port


def _request(
    port: int, method: str, path: str, body: str = "", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def _raw(port: int, data: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _session(port: int) -> tuple[str, str]:
    """A session's cookie and CSRF token, as a first visit gets them (tokens off; the
    purgatory must have a pending operation, whose forms carry the token)."""
    status, headers, body = _request(port, "GET", "/p/default")
    assert status == 200
    match = re.search(r'name="csrf" value="([^"]+)"', body)
    assert match is not None
    return headers["Set-Cookie"].split(";")[0], match.group(1)


def test_a_first_visit_gets_a_strict_httponly_cookie_and_the_security_headers(port: int) -> None:
    status, headers, body = _request(port, "GET", "/")
    assert status == 200 and "<h1>Overview</h1>" in body
    cookie = headers["Set-Cookie"]
    assert re.fullmatch(r"purgatory_console=[\w-]{40,}; Path=/; HttpOnly; SameSite=Strict", cookie)
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, _ = _request(port, "GET", "/static/console.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")


def test_posts_without_a_session_or_its_csrf_token_are_refused(
    server: ServerThread, port: int
) -> None:
    with PurgatoryClient(server.target, trust_env=False) as client:
        client.try_complete_else_watch(["k"], 60_000, operation_id="http-csrf")
        form = urlencode({"operation_id": "http-csrf"})
        status, _, body = _request(port, "POST", "/p/default/cancel", form, FORM)
        assert status == 403 and "CSRF" in body  # no session at all
        cookie, csrf = _session(port)
        with_cookie = {**FORM, "Cookie": cookie}
        status, _, _ = _request(port, "POST", "/p/default/cancel", form, with_cookie)
        assert status == 403
        wrong = urlencode({"operation_id": "http-csrf", "csrf": csrf[:-1] + "x"})
        status, _, _ = _request(port, "POST", "/p/default/cancel", wrong, with_cookie)
        assert status == 403
        assert client.get_operation("http-csrf").state is OperationState.WATCHING
        good = urlencode({"operation_id": "http-csrf", "csrf": csrf})
        status, headers, _ = _request(port, "POST", "/p/default/cancel", good, with_cookie)
        assert status == 303 and headers["Location"] == "/p/default"
        assert client.get_operation("http-csrf").state is OperationState.CANCELLED


def test_bad_input_is_refused_with_its_reason(server: ServerThread, port: int) -> None:
    with PurgatoryClient(server.target, trust_env=False) as client:
        client.try_complete_else_watch(["k"], 60_000, operation_id="http-bad-input")
    cookie, csrf = _session(port)  # the operation's forms carry the CSRF token
    form = urlencode({"operation_id": "nobody", "csrf": csrf, "timeout_s": "soon"})
    status, _, body = _request(
        port, "POST", "/p/default/reschedule", form, {**FORM, "Cookie": cookie}
    )
    assert status == 400 and "timeout_s: expected a number of seconds" in body
    # A discard naming no dead letter is refused, never taken for "all".
    status, _, body = _request(
        port,
        "POST",
        "/p/default/groups/g/discard",
        urlencode({"csrf": csrf}),
        {**FORM, "Cookie": cookie},
    )
    assert status == 400 and "sequence: required" in body
    status, _, body = _request(port, "GET", "/p/missing")
    assert status == 404 and "NOT_FOUND" in body
    status, _, body = _request(port, "GET", "/p/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert status == 400 and "INVALID_ARGUMENT" in body
    assert "<script>alert" not in body
    status, _, _ = _request(port, "GET", "/no/such/page")
    assert status == 404
    status, _, _ = _request(port, "GET", "/static/../listener.py")
    assert status == 404


def test_malformed_and_oversized_requests(port: int) -> None:
    assert _raw(port, b"NONSENSE\r\n\r\n").startswith("HTTP/1.1 400 ")
    assert _raw(port, b"DELETE / HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 405 ")
    assert _raw(port, b"GET /p/%ff HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 400 ")
    big = b"POST /p/default/cancel HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n"
    assert _raw(port, big).startswith("HTTP/1.1 413 ")
    long_head = b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"
    assert _raw(port, long_head).startswith("HTTP/1.1 431 ")


def test_stopping_the_server_removes_the_consoles_socket() -> None:
    with ServerThread(replace(TEST_CONFIG, console_listen="127.0.0.1:0")) as st:
        assert st.server is not None and st.server.console is not None
        path = st.server.console.socket
        assert path.is_socket()
    assert not path.parent.exists()
