"""The console bench's browser stand-in: a process that keeps the live outcomes page's
event stream open and fetches console pages in a loop, timing each.

Run in a process of its own (``multiprocessing``, spawn), so its parsing and its reading
of the event stream never share a GIL with the load generator. It behaves as a browser
would: the first visit's session cookie goes with every request; the event stream starts
after the purgatory's last sequence, as the live page opens it. It sets ``ready`` once
the stream is open and the first pages answered, polls until ``stop`` is set, and sends
back ``{"pages": {path: [seconds, ...]}, "events": n, "errors": [...]}``.
"""

from __future__ import annotations

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


def _read_events(response: http.client.HTTPResponse, counts: dict[str, int]) -> None:
    """Count the stream's outcome events (``id:`` lines) until it closes."""
    carry = b""
    while True:
        try:
            chunk = response.read1(1 << 16)
        except (OSError, http.client.HTTPException):
            return
        if not chunk:
            return
        # Every event follows a blank line, so each is one b"\nid: " (5 bytes): 4 bytes
        # carried over find one split between chunks, and cannot hold a whole one.
        data = carry + chunk
        counts["events"] += data.count(b"\nid: ")
        carry = data[-4:]


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
    counts = {"events": 0}
    status, body, response = _get(conn, "/", "")
    cookie = (response.getheader("Set-Cookie") or "").split(";", 1)[0]
    # The live page, then its event stream after the sequence the page was drawn at.
    status, body, _ = _get(conn, f"/p/{name}/live", cookie)
    match = SEQUENCE.search(body)
    after = match.group(1).decode() if match else "0"
    sse = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sse.request("GET", f"/p/{name}/events?after={after}", headers={"Cookie": cookie})
    stream = sse.getresponse()
    if stream.status != 200:
        errors.append(f"events: HTTP {stream.status}")
    reader = threading.Thread(target=_read_events, args=(stream, counts), daemon=True)
    reader.start()
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
    sse.close()  # the server ends the Subscribe stream when the connection closes
    reader.join(5)
    conn.close()
    out.send(json.dumps({"pages": latencies, "events": counts["events"], "errors": errors}))
