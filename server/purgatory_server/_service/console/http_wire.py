"""HTTP/1.1 on asyncio streams: one request read, one response written.

Enough HTTP for a console a browser talks to: request line, headers, a ``Content-Length``
body (form-encoded), cookies and query strings; no chunked requests, no pipelining (every
response closes the connection). Anything malformed or over the limits is
:class:`BadRequest`, answered 400 by the listener.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["MAX_BODY", "BadRequest", "Request", "Response", "read_request", "write_response"]

MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
_METHODS = frozenset({"GET", "HEAD", "POST"})


class BadRequest(Exception):
    """The request cannot be read (malformed, too large): answered 400 or 413."""

    def __init__(self, reason: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(reason)
        self.status = status


def _first(values: Mapping[str, list[str]]) -> dict[str, str]:
    return {k: v[0] for k, v in values.items() if v}


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request; header names are lower-case, ``path`` is percent-decoded."""

    method: str
    path: str
    segments: tuple[str, ...]
    query: dict[str, str]
    headers: dict[str, str]
    cookies: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)


def _parse_cookies(header: str) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _decode(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(f"{what} is not UTF-8") from None


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request, or None if the peer closed before sending one."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise BadRequest("incomplete request head") from None
    except asyncio.LimitOverrunError:
        raise BadRequest(
            "request head too large", HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
        ) from None
    if len(head) > MAX_HEAD:
        raise BadRequest("request head too large", HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
    lines = _decode(head, "request head").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest("malformed request line")
    method, target, _ = parts
    if method not in _METHODS:
        raise BadRequest("method not allowed", HTTPStatus.METHOD_NOT_ALLOWED)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest("malformed header")
        headers[name.lower()] = value.strip()
    url = urlsplit(target)
    raw_segments = [s for s in url.path.split("/") if s]
    segments = tuple(unquote(s, errors="strict") for s in _checked(raw_segments))
    form: dict[str, str] = {}
    if method == "POST":
        form = await _read_form(reader, headers)
    return Request(
        method=method,
        path=url.path,
        segments=segments,
        query=_first(parse_qs(url.query, keep_blank_values=True)),
        headers=headers,
        cookies=_parse_cookies(headers.get("cookie", "")),
        form=form,
    )


def _checked(segments: list[str]) -> list[str]:
    for s in segments:
        try:
            unquote(s, errors="strict")
        except UnicodeDecodeError:
            raise BadRequest("path is not UTF-8") from None
    return segments


async def _read_form(reader: asyncio.StreamReader, headers: dict[str, str]) -> dict[str, str]:
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit():
        raise BadRequest("Content-Length must be a number")
    length = int(length_text)
    if length > MAX_BODY:
        raise BadRequest("request body too large", HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise BadRequest("incomplete request body") from None
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if length and kind != "application/x-www-form-urlencoded":
        raise BadRequest("the body must be application/x-www-form-urlencoded")
    try:
        return _first(parse_qs(_decode(body, "body"), keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise BadRequest("body is not UTF-8") from None


@dataclass(slots=True)
class Response:
    """A whole response (body bytes) with its headers."""

    status: HTTPStatus = HTTPStatus.OK
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


# Sent with every response: no framing, no sniffing, no referrer to other sites (same-origin
# keeps the Origin header forms need), scripts only from here.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)


def head_bytes(status: HTTPStatus, headers: list[tuple[str, str]]) -> bytes:
    """A response's status line and headers, the security headers included."""
    lines = [f"HTTP/1.1 {status.value} {status.phrase}"]
    lines += [f"{k}: {v}" for k, v in (*SECURITY_HEADERS, *headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def write_response(writer: asyncio.StreamWriter, response: Response, head_only: bool) -> None:
    """Write ``response`` whole; the connection closes after it."""
    headers = [
        ("Content-Type", response.content_type),
        ("Content-Length", str(len(response.body))),
        ("Connection", "close"),
        *response.headers,
    ]
    writer.write(head_bytes(response.status, headers))
    if not head_only:
        writer.write(response.body)
    await writer.drain()
