"""Live outcomes: the page, and its server-sent event stream over Subscribe.

Each outcome is one event whose ``id`` is its sequence, so a browser that reconnects
sends ``Last-Event-ID`` and the stream resumes after it (Subscribe's ``after_sequence``):
no gap and no repeat while the purgatory's retained window still holds the missed ones.
The page opens the stream after the sequence it was drawn at; pausing closes it and
resuming opens it after the last event shown. A refusal (permission, a sequence the
window no longer holds) is sent as a ``refused`` event and ends the stream.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from http import HTTPStatus

from purgatory_client import Event
from purgatory_client.errors import PurgatoryError

from purgatory_server._service.console.http_wire import head_bytes
from purgatory_server._service.console.markup import Html, esc, page, table, url
from purgatory_server._service.console.refusals import BadInput
from purgatory_server._service.console.view import View

__all__ = ["live_page", "resume_point", "stream_outcomes"]

HEARTBEAT_MS = 15_000


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
    body = Html(
        f'<p class="subnav"><a href="{esc(url("p", name))}">← operations</a></p>'
        f'<div id="live" data-stream="{esc(stream)}" data-after="{esc(info.last_sequence)}">'
        f"{controls}"
        + table(["#sequence", "operation", "state", "keys", "#waited", "ended"], [], "live")
        + "</div>"
    )
    return page(f"Live outcomes of {name}", body, signed_in=view.signed_in, csrf=view.csrf)


def _event(ev: Event) -> bytes:
    data = {
        "sequence": ev.sequence,
        "operation_id": ev.operation_id,
        "state": ev.state.name.lower(),
        "keys": list(ev.keys),
        "waited_ms": max(0, ev.complete_time_ms - ev.create_time_ms),
        "complete_time_ms": ev.complete_time_ms,
    }
    return f"id: {ev.sequence}\nevent: outcome\ndata: {json.dumps(data)}\n\n".encode()


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
    events = view.client.subscribe(
        purgatory=name, after_sequence=after, heartbeat_interval_ms=HEARTBEAT_MS
    )
    try:
        async with aclosing(events) as stream:  # type: ignore[type-var]
            async for ev in stream:
                writer.write(b": heartbeat\n\n" if ev.heartbeat else _event(ev))
                await writer.drain()
    except PurgatoryError as exc:
        message = json.dumps({"status": exc.code.name, "message": exc.details})
        writer.write(f"event: refused\ndata: {message}\n\n".encode())
        await writer.drain()
