"""The self-contained HTML report: inline SVG charts drawn here, no script or font from a CDN.

Why SVG generated in Python: the report must open offline (an operator's laptop, an air-
gapped host), and a few bar and line charts do not need a charting library. Every chart is
an ``<svg class="chart">`` with a ``data-chart`` name; the page's only script measures each
chart's drawn size after layout into ``data-rendered-*`` attributes, which the browser test
reads back (a chart that rendered empty shows as 0).
"""

from __future__ import annotations

from html import escape
from typing import Any

COLORS = {
    "arrivals": "#4e79a7",
    "completed": "#59a14f",
    "expired": "#e15759",
    "force_completed": "#f28e2b",
    "cancelled": "#9c755f",
}
BAR = "#4e79a7"
_W, _H, _PAD = 760, 240, 48


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def _svg(name: str, title: str, body: list[str], height: int = _H) -> str:
    return (
        f"<figure><figcaption>{escape(title)}</figcaption>"
        f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{escape(title)}" '
        f'width="{_W}" height="{height}" viewBox="0 0 {_W} {height}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg></figure>'
    )


def _empty(name: str, title: str, why: str) -> str:
    return (
        f'<figure class="empty" data-chart="{escape(name)}">'
        f"<figcaption>{escape(title)}</figcaption><p>{escape(why)}</p></figure>"
    )


def line_chart(name: str, title: str, minutes: list[dict[str, Any]]) -> str:
    if not minutes:
        return _empty(name, title, "no arrivals or outcomes")
    series = list(COLORS)
    top = max(max(int(m.get(s) or 0) for s in series) for m in minutes) or 1
    n = len(minutes)
    span_x = _W - 2 * _PAD
    span_y = _H - 2 * _PAD

    def x(i: int) -> float:
        return _PAD + (span_x * i / (n - 1) if n > 1 else span_x / 2)

    def y(v: int) -> float:
        return _H - _PAD - span_y * v / top

    body = [
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#888"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#888"/>',
        f'<text x="{_PAD - 6}" y="{_PAD + 4}" text-anchor="end" font-size="11">{top}</text>',
        f'<text x="{_PAD - 6}" y="{_H - _PAD}" text-anchor="end" font-size="11">0</text>',
        f'<text x="{_PAD}" y="{_H - _PAD + 16}" font-size="11">'
        f"{escape(str(minutes[0]['minute']))}</text>",
        f'<text x="{_W - _PAD}" y="{_H - _PAD + 16}" text-anchor="end" font-size="11">'
        f"{escape(str(minutes[-1]['minute']))}</text>",
    ]
    for k, s in enumerate(series):
        points = " ".join(f"{x(i):.1f},{y(int(m.get(s) or 0)):.1f}" for i, m in enumerate(minutes))
        if n == 1:
            px, py = x(0), y(int(minutes[0].get(s) or 0))
            body.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{COLORS[s]}"/>')
        body.append(
            f'<polyline fill="none" stroke="{COLORS[s]}" stroke-width="2" points="{points}"/>'
        )
        lx = _PAD + 10 + k * 130
        body.append(f'<rect x="{lx}" y="8" width="12" height="12" fill="{COLORS[s]}"/>')
        body.append(f'<text x="{lx + 16}" y="18" font-size="12">{escape(s)}</text>')
    return _svg(name, title, body)


def bar_chart(name: str, title: str, bars: list[tuple[str, float]], unit: str = "") -> str:
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return _empty(name, title, "no data")
    height = 28 * len(bars) + 2 * 16
    top = float(max(v for _, v in bars)) or 1.0
    label_w = 200
    span = _W - label_w - 90
    body = []
    for i, (label, value) in enumerate(bars):
        y = 16 + i * 28
        width = max(span * float(value) / top, 1.0)
        body.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end" font-size="12">'
            f"{escape(label[:32])}</text>"
        )
        body.append(f'<rect x="{label_w}" y="{y}" width="{width:.1f}" height="20" fill="{BAR}"/>')
        body.append(
            f'<text x="{label_w + width + 6:.1f}" y="{y + 15}" font-size="12">'
            f"{_num(value)}{escape(unit)}</text>"
        )
    return _svg(name, title, body, height)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{escape(_num(c) if not isinstance(c, str) else c)}</td>" for c in r)
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _quantile_bars(stats: dict[str, Any] | None) -> list[tuple[str, float]]:
    if not stats or not stats.get("count"):
        return []
    return [(k, v) for k, v in stats.items() if k.startswith("p") or k == "max"]


def _purgatory_section(name: str, info: dict[str, Any]) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in name)
    parts = [f'<section id="p-{escape(slug)}"><h2>Purgatory <code>{escape(name)}</code></h2>']
    states = info["states"]
    parts.append(_table(["state", "operations"], [[s, c] for s, c in sorted(states.items())]))
    shown = len(info["per_minute"])
    caption = f"Arrivals and outcomes per minute ({shown} of {info['minutes']} minutes, UTC)"
    parts.append(line_chart(f"{slug}-per-minute", caption, info["per_minute"]))
    parts.append(
        bar_chart(
            f"{slug}-wait",
            f"Wait time of completed operations (n={_num((info['wait_ms'] or {}).get('count'))})",
            _quantile_bars(info["wait_ms"]),
            " ms",
        )
    )
    parts.append(
        bar_chart(
            f"{slug}-lateness",
            "Expiry lateness, the timer-precision SLO "
            f"(n={_num((info['lateness_ms'] or {}).get('count'))})",
            _quantile_bars(info["lateness_ms"]),
            " ms",
        )
    )
    for metric in ("watches", "signals", "expirations"):
        entries = info["top_keys"].get(metric, [])
        parts.append(
            bar_chart(
                f"{slug}-top-{metric}",
                f"Top keys by {metric}",
                [(e["key"], e["count"]) for e in entries],
            )
        )
    acks = info["ack_latency_ms"]
    parts.append(
        bar_chart(
            f"{slug}-acks",
            "N-acks conditions: p99 latency of each source's first acknowledgement",
            [(a["source"] or "(no source)", a["p99"]) for a in acks],
            " ms",
        )
    )
    if acks:
        parts.append(
            _table(
                ["source", "operations", "p50 ms", "p90 ms", "p99 ms", "max ms"],
                [[a["source"], a["count"], a["p50"], a["p90"], a["p99"], a["max"]] for a in acks],
            )
        )
    parts.append("</section>")
    return "".join(parts)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:900px}
h1{font-size:22px}h2{font-size:18px;border-top:1px solid #ddd;padding-top:16px}
figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:right}th{background:#f4f4f4}svg.chart{background:#fafafa;border:1px solid #eee}
"""

_MEASURE = """
document.querySelectorAll('svg.chart').forEach(function (svg) {
  var box = svg.getBBox();
  var marks = svg.querySelectorAll('rect,polyline,circle,path').length;
  svg.setAttribute('data-rendered-width', Math.round(box.width));
  svg.setAttribute('data-rendered-height', Math.round(box.height));
  svg.setAttribute('data-rendered-marks', marks);
});
document.body.setAttribute('data-measured', 'yes');
"""


def render_html(summary: dict[str, Any]) -> str:
    """The report page for a JSON summary (see :func:`purgatory_pipeline.report.summarise`)."""
    sections = [_purgatory_section(n, i) for n, i in summary["purgatories"].items()]
    if not sections:
        sections = ["<p>No purgatory in the tables.</p>"]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>Purgatory operations report</title>"
        f"<style>{_STYLE}</style></head><body><h1>Purgatory operations report</h1>"
        + "".join(sections)
        + f"<script>{_MEASURE}</script></body></html>\n"
    )
