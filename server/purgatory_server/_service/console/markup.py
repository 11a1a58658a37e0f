"""HTML building blocks: every user-supplied string goes through :func:`esc`.

Pages are built from :class:`Html` fragments; a plain ``str`` put into a page is always
escaped (``html.escape`` with quotes), so an id such as ``<script>`` or ``" onmouseover=``
is shown as text wherever it appears, in element text or attribute values. Path segments
are percent-encoded with :func:`seg`. Figures carry their units (ms, s, /s, MiB).
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

__all__ = [
    "Html",
    "age",
    "bytes_text",
    "esc",
    "form",
    "join",
    "page",
    "seg",
    "table",
    "url",
    "when",
]


class Html(str):
    """Markup that is already safe: never escaped again."""

    __slots__ = ()


def esc(value: object) -> Html:
    """``value`` as safe markup: :class:`Html` as it is, anything else escaped."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(sep.join(esc(p) for p in parts))


def seg(value: str) -> str:
    """One path segment, percent-encoded (``/`` included)."""
    return quote(value, safe="")


def url(*segments: str, **query: str) -> str:
    """A console path from raw segments and query parameters (empty ones left out)."""
    path = "/" + "/".join(seg(s) for s in segments)
    wanted = {k: v for k, v in query.items() if v}
    return path + ("?" + urlencode(wanted) if wanted else "")


def when(epoch_ms: int, now_ms: int | None = None) -> Html:
    """An epoch-ms time as UTC ISO-8601 to the millisecond, and how far from now."""
    if not epoch_ms:
        return Html("—")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stamp = datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    delta = (epoch_ms - now_ms) / 1000
    rel = f"in {delta:.1f} s" if delta >= 0 else f"{-delta:.1f} s ago"
    return Html(
        f'<time datetime="{esc(epoch_ms)}">{esc(stamp)} UTC</time> '
        f'<span class="rel">({esc(rel)})</span>'
    )


def age(seconds: float | None) -> str:
    """A duration with its unit (ms under a second)."""
    if seconds is None:
        return "—"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def bytes_text(n: int) -> str:
    """A byte count in KiB under a MiB, else MiB."""
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def table(headers: Iterable[str], rows: Iterable[Iterable[object]], cls: str = "") -> Html:
    """A table; cells are escaped unless they are :class:`Html`. A header or cell that
    starts with ``#`` is numeric (right-aligned), the ``#`` not shown."""
    heads = list(headers)
    numeric = [h.startswith("#") for h in heads]
    head = join(
        Html(f'<th class="num">{esc(h[1:])}</th>') if n else Html(f"<th>{esc(h)}</th>")
        for h, n in zip(heads, numeric, strict=True)
    )
    body = []
    for row in rows:
        cells = [
            Html(f'<td class="num">{esc(c)}</td>') if n else Html(f"<td>{esc(c)}</td>")
            for c, n in zip(row, numeric, strict=True)
        ]
        body.append(Html(f"<tr>{join(cells)}</tr>"))
    if not body:
        body.append(Html(f'<tr><td colspan="{len(heads)}" class="empty">none</td></tr>'))
    return Html(
        f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{join(body)}</tbody></table>"
    )


_NOTHING = Html("")


def form(
    action: str,
    csrf: str,
    button: str,
    fields: Iterable[tuple[str, str]] = (),
    *,
    confirm: str = "",
    extra: Html = _NOTHING,
    cls: str = "",
) -> Html:
    """A POST form with its CSRF token; ``confirm``: the question asked before sending."""
    hidden = join(
        Html(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">') for k, v in fields
    )
    ask = f' data-confirm="{esc(confirm)}"' if confirm else ""
    return Html(
        f'<form method="post" action="{esc(action)}" class="inline {esc(cls)}"{ask}>'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">{hidden}{extra}'
        f'<button type="submit">{esc(button)}</button></form>'
    )


def page(title: str, body: Html, *, signed_in: str = "", csrf: str = "", notice: str = "") -> Html:
    """The whole page: header with navigation, an optional notice, ``body``."""
    logout = form("/logout", csrf, "Sign out", cls="logout") if signed_in and csrf else Html("")
    who = Html(f'<span class="who">{esc(signed_in)}</span>') if signed_in else Html("")
    note = Html(f'<p class="notice" role="status">{esc(notice)}</p>') if notice else Html("")
    return Html(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · Purgatory console</title>"
        '<link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head><body>'
        '<header><a class="brand" href="/">Purgatory console</a>'
        f"<nav>{who}{logout}</nav></header>"
        f"<main><h1>{esc(title)}</h1>{note}{body}</main></body></html>"
    )
