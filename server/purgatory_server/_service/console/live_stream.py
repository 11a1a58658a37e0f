"""Live outcomes: the page, and its server-sent event stream over Subscribe.

Each outcome is one event whose ``id`` is its sequence, so a browser that reconnects
sends ``Last-Event-ID`` and the stream resumes after it (Subscribe's ``after_sequence``):
no gap and no repeat while the purgatory's retained window still holds the missed ones.
The page opens the stream after the sequence it was drawn at; pausing closes it and
resuming opens it after the last event shown.

A person reads tens of outcomes a second, not thousands, and relaying each outcome
costs the server a Subscribe stream's work. So the stream shows at most
``SAMPLE_CAP`` outcomes per ``SAMPLE_WINDOW_S``: when a window's cap is reached the
subscription is closed (the server no longer sends this page anything), a ``sampling``
event says so, and at the next window the stream subscribes again from now. The first
outcome after such a jump names what was skipped: a ``skipped`` event with the last
sequence shown, the next one shown and how many lie between (every outcome of a
purgatory has the next sequence, so the count is exact). A window that stays under the
cap keeps its subscription, and the stream is gap-free again (a ``gapfree`` event).

A resume the server cannot serve (its point has left the retained window, or the
subscription was cut as a slow subscriber) is not the end of the page: a ``jumped``
event gives the reason and the stream goes on from now (the gap is announced as
above). Any other refusal (permission, an unknown purgatory) is sent as a ``refused``
event and ends the stream.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from http import HTTPStatus
from typing import Any

from purgatory_client import Event
from purgatory_client.errors import OutOfRangeError, PurgatoryError, SlowSubscriberError

from purgatory_server._service.console.http_wire import head_bytes
from purgatory_server._service.console.markup import Html, esc, page, table, url
from purgatory_server._service.console.refusals import BadInput
from purgatory_server._service.console.view import View

__all__ = ["SAMPLE_CAP", "SAMPLE_WINDOW_S", "live_page", "resume_point", "stream_outcomes"]

HEARTBEAT_MS = 15_000
# At most this many outcomes are relayed per window (50 a second); above it, a sample.
SAMPLE_CAP = 25
SAMPLE_WINDOW_S = 0.5


def resume_point(last_event_id: str, after: str) -> int | None:
    """Where a stream resumes: ``Last-Event-ID`` first, then ``?after=``; None: now."""
    for field, given in (("Last-Event-ID", last_event_id), ("after", after)):
        text = given.strip()
        if text:
            if not text.isdigit():
                raise BadInput(f"{field}: expected a sequence number")
            return int(text)
    return None


async def live_page(view: View, name: str) -> Html:
    info = await view.client.get_purgatory(name)
    stream = url("p", name, "events", after=str(info.last_sequence))
    controls = Html(
        '<div class="live-controls">'
        '<button type="button" id="pause">Pause</button>'
        '<label>filter <input id="filter" placeholder="id, key or state"></label>'
        '<span id="live-status" role="status">connecting…</span></div>'
    )
    cap = SAMPLE_CAP / SAMPLE_WINDOW_S
    body = Html(
        f'<p class="subnav"><a href="{esc(url("p", name))}">← operations</a></p>'
        f'<div id="live" data-stream="{esc(stream)}" data-after="{esc(info.last_sequence)}">'
        f"{controls}"
        f'<p class="hint">Every outcome is shown up to {cap:g} a second; above that, a'
        " sample, with what was skipped in between.</p>"
        + table(["#sequence", "operation", "state", "keys", "#waited", "ended"], [], "live")
        + "</div>"
    )
    return page(f"Live outcomes of {name}", body, signed_in=view.signed_in, csrf=view.csrf)


def _sse(kind: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def _outcome(ev: Event) -> bytes:
    data = {
        "sequence": ev.sequence,
        "operation_id": ev.operation_id,
        "state": ev.state.name.lower(),
        "keys": list(ev.keys),
        "waited_ms": max(0, ev.complete_time_ms - ev.create_time_ms),
        "complete_time_ms": ev.complete_time_ms,
    }
    return _sse("outcome", data, ev.sequence)


async def stream_outcomes(
    view: View,
    name: str,
    after: int | None,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """Write the event stream until the browser leaves (its end of the connection
    closes: noticed at once, not at the next write) or the subscription ends."""
    streaming = asyncio.ensure_future(_write_events(view, name, after, writer))
    gone = asyncio.ensure_future(reader.read(1))
    try:
        await asyncio.wait((streaming, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (streaming, gone):
            task.cancel()
        await asyncio.gather(streaming, gone, return_exceptions=True)


class _Relay:
    """One page's stream: what it has shown, and whether it is showing a sample."""

    def __init__(self, view: View, name: str, after: int | None, writer: asyncio.StreamWriter):
        self.view, self.name, self.writer = view, name, writer
        self.shown = after  # the last sequence the page has (None: nothing yet)
        self.sampling = False
        self.loop = asyncio.get_running_loop()

    async def run(self) -> None:
        resume = self.shown
        while True:
            try:
                window_end = await self._relay(resume)
            except (OutOfRangeError, SlowSubscriberError) as exc:
                await self._send("jumped", {"after": self.shown, "reason": _reason(exc)})
                resume = None
                continue
            except PurgatoryError as exc:
                await self._send("refused", {"status": exc.code.name, "message": exc.details})
                return
            if window_end is None:
                return  # the subscription ended
            await asyncio.sleep(max(0.0, window_end - self.loop.time()))
            resume = None  # a sample: from now

    async def _relay(self, after: int | None) -> float | None:
        """Relay one subscription; the end of the window whose cap closed it, or None
        when the subscription itself ended."""
        events = self.view.client.subscribe(
            purgatory=self.name, after_sequence=after, heartbeat_interval_ms=HEARTBEAT_MS
        )
        window_end = self.loop.time() + SAMPLE_WINDOW_S
        count = 0
        async with aclosing(events) as stream:  # type: ignore[type-var]
            async for ev in stream:
                if ev.heartbeat:
                    self.writer.write(b": heartbeat\n\n")
                    await self.writer.drain()
                    continue
                now = self.loop.time()
                if now >= window_end:
                    window_end, count = now + SAMPLE_WINDOW_S, 0
                    if self.sampling:
                        self.sampling = False
                        await self._send("gapfree", {"after": self.shown})
                if self.shown is not None and ev.sequence > self.shown + 1:
                    gap = {"after": self.shown, "next": ev.sequence}
                    await self._send("skipped", gap | {"count": ev.sequence - self.shown - 1})
                self.writer.write(_outcome(ev))
                self.shown = ev.sequence
                count += 1
                if count >= SAMPLE_CAP:
                    if not self.sampling:
                        self.sampling = True
                        cap = SAMPLE_CAP / SAMPLE_WINDOW_S
                        await self._send("sampling", {"after": self.shown, "cap_per_s": cap})
                    await self.writer.drain()
                    return window_end
                await self.writer.drain()
        return None

    async def _send(self, kind: str, data: dict[str, Any]) -> None:
        self.writer.write(_sse(kind, data))
        await self.writer.drain()


def _reason(exc: PurgatoryError) -> str:
    if isinstance(exc, OutOfRangeError):
        oldest = exc.oldest_sequence
        held = f" (the oldest held is #{oldest})" if oldest is not None else ""
        return f"the resume point is no longer retained{held}"
    return "the stream fell behind and was cut"


async def _write_events(
    view: View, name: str, after: int | None, writer: asyncio.StreamWriter
) -> None:
    writer.write(
        head_bytes(
            HTTPStatus.OK,
            [("Content-Type", "text/event-stream; charset=utf-8"), ("Connection", "close")],
        )
    )
    writer.write(b"retry: 1000\n\n")
    await writer.drain()
    await _Relay(view, name, after, writer).run()
