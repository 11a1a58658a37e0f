"""The console bench's browser stand-in: a process that keeps the live outcomes page's
event stream open and fetches console pages in a loop, timing each.

Run in a process of its own (``multiprocessing``, spawn), so its parsing and its reading
of the event stream never share a GIL with the load generator. It behaves as a browser
would: the first visit's session cookie goes with every request; the event stream starts
after the purgatory's last sequence, as the live page opens it. It sets ``ready`` once
the stream is open and the first pages answered, polls until ``stop`` is set, and sends
back ``{"pages": {path: [seconds, ...]}, "events": n, "skipped": n, "samplings": n,
"jumps": [...], "reconnects": n, "refusals": [...], "errors": [...]}``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from typing import Any

__all__ = ["poll"]

SEQUENCE = re.compile(rb'data-after="(\d+)"')


def _get(conn: http.client.HTTPConnection, path: str, cookie: str) -> tuple[int, bytes, Any]:
    conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
    response = conn.getresponse()
    return response.status, response.read(), response


class EventStream:
    """The live page's ``EventSource``: reads the stream on a thread, counting its
    events (outcomes; the outcomes a sample skipped; jumps to now; switches to a sample);
    when the server ends it (a refusal), reconnects after the stream's ``retry`` (1 s)
    with ``Last-Event-ID``, as a browser does. Closed by :meth:`close`."""

    def __init__(self, port: int, path: str, cookie: str) -> None:
        self._port = port
        self._path = path
        self._cookie = cookie
        self._closed = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self.events = 0
        self.skipped = 0
        self.samplings = 0
        self.jumps: list[str] = []
        self.reconnects = 0
        self.refusals: list[str] = []
        self.last_id = ""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            headers = {"Cookie": self._cookie}
            if self.last_id:
                headers["Last-Event-ID"] = self.last_id
            conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=30)
            self._conn = conn
            try:
                conn.request("GET", self._path, headers=headers)
                self._read(conn.getresponse())
            except (OSError, http.client.HTTPException):
                pass
            conn.close()
            if self._closed.wait(1.0):
                return
            self.reconnects += 1

    def _read(self, response: http.client.HTTPResponse) -> None:
        pending = b""
        while chunk := response.read1(1 << 16):
            *whole, pending = (pending + chunk).split(b"\n\n")
            for block in whole:
                self._event(block)

    def _event(self, block: bytes) -> None:
        fields: dict[bytes, bytes] = {}
        for line in block.split(b"\n"):
            name, _, value = line.partition(b": ")
            fields[name] = value
        kind = fields.get(b"event", b"")
        if kind == b"outcome":
            self.events += 1
            self.last_id = fields[b"id"].decode()
        elif kind == b"skipped":
            self.skipped += int(json.loads(fields[b"data"])["count"])
        elif kind == b"sampling":
            self.samplings += 1
        elif kind == b"jumped" and len(self.jumps) < 10:
            self.jumps.append(json.loads(fields[b"data"])["reason"])
        elif kind == b"refused" and len(self.refusals) < 10:
            self.refusals.append(fields[b"data"].decode(errors="replace"))

    def close(self) -> None:
        self._closed.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):  # closed already
                conn.sock.shutdown(2)  # the server ends the Subscribe stream at once
        self._thread.join(5)


def poll(
    port: int,
    name: str,
    *,
    pages: list[str],
    interval_s: float,
    ready: EventType,
    stop: EventType,
    out: Connection,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies: dict[str, list[float]] = {path: [] for path in pages}
    errors: list[str] = []
    status, body, response = _get(conn, "/", "")
    cookie = (response.getheader("Set-Cookie") or "").split(";", 1)[0]
    # The live page, then its event stream after the sequence the page was drawn at.
    status, body, _ = _get(conn, f"/p/{name}/live", cookie)
    match = SEQUENCE.search(body)
    after = match.group(1).decode() if match else "0"
    stream = EventStream(port, f"/p/{name}/events?after={after}", cookie)
    for path in pages:  # warm: the first of each page is not timed
        _get(conn, path, cookie)
    ready.set()
    while not stop.is_set():
        for path in pages:
            t0 = time.perf_counter()
            status, body, _ = _get(conn, path, cookie)
            latencies[path].append(time.perf_counter() - t0)
            if status != 200 and len(errors) < 10:
                errors.append(f"{path}: HTTP {status}")
        stop.wait(interval_s)
    stream.close()
    conn.close()
    figures = {
        "pages": latencies,
        "events": stream.events,
        "skipped": stream.skipped,
        "samplings": stream.samplings,
        "jumps": stream.jumps,
        "reconnects": stream.reconnects,
        "refusals": stream.refusals,
        "errors": errors,
    }
    out.send(json.dumps(figures))
