"""The self-contained HTML report: inline SVG charts drawn here, no script or font from a CDN.

Why SVG generated in Python: the report must open offline (an operator's laptop, an air-
gapped host), and a few bar and line charts do not need a charting library. Every chart is
an ``<svg class="chart">`` with a ``data-chart`` name; the page's only script measures each
chart's drawn size after layout into ``data-rendered-*`` attributes, which the browser test
reads back (a chart that rendered empty shows as 0).
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from math import log10
from typing import Any

COLORS = {
    "arrivals": "#4e79a7",
    "completed": "#59a14f",
    "expired": "#e15759",
    "force_completed": "#f28e2b",
    "cancelled": "#9c755f",
}
BAR = "#4e79a7"
# Missing minutes longer than this are shaded and labelled on the per-minute chart.
GAP_MINUTES = 10
# An expiry fired more than this after its deadline is counted as released late (downtime,
# a stall), not as timer precision; report.py splits the lateness summary by it.
LATE_RELEASE_MS = 500
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


def _minute(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _duration(minutes: float) -> str:
    hours, rest = divmod(int(minutes), 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{rest} min"]
    return " ".join(p for p in parts if p)


# Tick steps of the time axis, in minutes: the smallest that gives at most _MAX_TICKS.
_TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080, 20160, 43200)
_MAX_TICKS = 6


def _time_ticks(first: datetime, last: datetime) -> list[datetime]:
    """The first and last minute, and between them the whole multiples of a round step
    (1, 2, 5, 10... minutes) far enough from both not to overlap their labels: every tick
    is a different minute, so no two labels read the same (minutes are whole: the data
    is per minute)."""
    span = (last - first).total_seconds() / 60
    if span <= 0:
        return [first]
    step = next((s for s in _TICK_STEPS if span / s <= _MAX_TICKS - 1), _TICK_STEPS[-1])
    epoch_minutes = int(first.timestamp() // 60)
    start = (epoch_minutes // step + 1) * step
    inner = []
    for minute in range(start, int(last.timestamp() // 60), step):
        tick = datetime.fromtimestamp(minute * 60, UTC)
        near_end = min(tick - first, last - tick).total_seconds() / 60 < step / 2
        if not near_end:
            inner.append(tick)
    return [first, *inner, last]


def line_chart(name: str, title: str, minutes: list[dict[str, Any]]) -> str:
    """Per-minute series on a time axis: a minute is placed by its time, not its position.

    Consecutive minutes are joined; where minutes are missing (no arrival, no outcome) the
    lines break, and a gap longer than ``GAP_MINUTES`` is shaded and labelled with its
    length, so six quiet hours do not vanish between two adjacent points.
    """
    if not minutes:
        return _empty(name, title, "no arrivals or outcomes")
    series = list(COLORS)
    top = max(max(int(m.get(s) or 0) for s in series) for m in minutes) or 1
    times = [_minute(m["minute"]) for m in minutes]
    first, last = times[0], times[-1]
    span_s = (last - first).total_seconds() or 60.0
    left, right, top_pad, bottom = _PAD + 24, _W - _PAD, _PAD, _H - _PAD - 14
    span_x, span_y = right - left, bottom - top_pad

    def x(t: datetime) -> float:
        if last == first:
            return left + span_x / 2
        return left + span_x * (t - first).total_seconds() / span_s

    def y(v: int) -> float:
        return bottom - span_y * v / top

    body = [
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{bottom}" stroke="#888"/>',
        f'<text x="{left - 6}" y="{top_pad + 4}" text-anchor="end" font-size="11">{top}</text>',
        f'<text x="{left - 6}" y="{bottom}" text-anchor="end" font-size="11">0</text>',
        f'<text class="axis-title" data-axis="x" x="{(left + right) / 2:.0f}" y="{_H - 6}" '
        'text-anchor="middle" font-size="12">time (UTC), one point per minute</text>',
        f'<text class="axis-title" data-axis="y" x="14" y="{(top_pad + bottom) / 2:.0f}" '
        f'text-anchor="middle" font-size="12" transform="rotate(-90 14 '
        f'{(top_pad + bottom) / 2:.0f})">operations per minute</text>',
    ]
    fmt = "%H:%M" if (last - first).days < 1 else "%m-%d %H:%M"
    for tick in _time_ticks(first, last):
        tx = x(tick)
        body.append(
            f'<line x1="{tx:.1f}" y1="{bottom}" x2="{tx:.1f}" y2="{bottom + 4}" stroke="#888"/>'
        )
        body.append(
            f'<text x="{tx:.1f}" y="{bottom + 16}" text-anchor="middle" font-size="11">'
            f"{tick.strftime(fmt)}</text>"
        )
    runs: list[list[int]] = [[0]]
    for i in range(1, len(minutes)):
        gap = (times[i] - times[i - 1]).total_seconds() / 60
        if gap > 1:
            runs.append([])
            if gap > GAP_MINUTES:
                gx0, gx1 = x(times[i - 1]), x(times[i])
                quiet = _duration(gap - 1)
                width = max(gx1 - gx0, 1)
                body.append(
                    f'<rect class="gap" x="{gx0:.1f}" y="{top_pad}" width="{width:.1f}" '
                    f'height="{span_y}" fill="#eee"><title>{quiet} without arrivals or '
                    "outcomes</title></rect>"
                )
                body.append(
                    f'<text x="{(gx0 + gx1) / 2:.1f}" y="{top_pad + 14}" text-anchor="middle" '
                    f'font-size="10" fill="#666">{escape(quiet)} quiet</text>'
                )
        runs[-1].append(i)
    for k, s in enumerate(series):
        for run in runs:
            if len(run) == 1:
                i = run[0]
                px, py = x(times[i]), y(int(minutes[i].get(s) or 0))
                body.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{COLORS[s]}"/>')
                continue
            points = " ".join(
                f"{x(times[i]):.1f},{y(int(minutes[i].get(s) or 0)):.1f}" for i in run
            )
            body.append(
                f'<polyline fill="none" stroke="{COLORS[s]}" stroke-width="2" points="{points}"/>'
            )
        lx = left + 10 + k * 130
        body.append(f'<rect x="{lx}" y="8" width="12" height="12" fill="{COLORS[s]}"/>')
        body.append(f'<text x="{lx + 16}" y="18" font-size="12">{escape(s)}</text>')
    return _svg(name, title, body)


def bar_chart(
    name: str, title: str, bars: list[tuple[str, float]], unit: str = "", *, log: bool = False
) -> str:
    """Horizontal bars; ``log`` scales lengths by log10(1 + value), so a p50 of a few ms
    stays visible next to a p99 of seconds (the value is printed at each bar either way).
    """
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return _empty(name, title, "no data")
    height = 28 * len(bars) + 2 * 16 + (18 if log else 0)
    top = float(max(v for _, v in bars)) or 1.0
    label_w = 200
    span = _W - label_w - 90
    body = []
    if log:
        body.append(
            f'<text class="axis-title" data-axis="x" x="{label_w}" y="{height - 6}" '
            f'font-size="11" fill="#666">log scale ({escape(unit.strip() or "count")})</text>'
        )
    for i, (label, value) in enumerate(bars):
        y = 16 + i * 28
        share = log10(1 + float(value)) / log10(1 + top) if log and top > 0 else float(value) / top
        width = max(span * share, 1.0)
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
    caption = (
        f"Arrivals and outcomes per minute ({shown} of {info['minutes']} minutes with "
        f"activity, {info.get('first_minute', '?')} to {info.get('last_minute', '?')} UTC)"
    )
    parts.append(line_chart(f"{slug}-per-minute", caption, info["per_minute"]))
    parts.append(
        bar_chart(
            f"{slug}-wait",
            f"Wait time of completed operations (n={_num((info['wait_ms'] or {}).get('count'))})",
            _quantile_bars(info["wait_ms"]),
            " ms",
            log=True,
        )
    )
    precision = info.get("timer_precision_ms") or {}
    parts.append(
        bar_chart(
            f"{slug}-lateness",
            f"Timer precision: lateness of expiries fired within {LATE_RELEASE_MS:,} ms of their "
            f"deadline (n={_num(precision.get('count'))})",
            _quantile_bars(precision),
            " ms",
            log=True,
        )
    )
    released = info.get("late_releases_ms") or {}
    parts.append(
        '<p class="late-releases">'
        f"Released late (more than {LATE_RELEASE_MS:,} ms after the deadline: a restart's "
        "downtime or a stalled server, not timer precision): "
        f"<b>{_num(released.get('count') or 0)}</b> expiries"
        + (
            f", p50 {_num(released.get('p50'))} ms, max {_num(released.get('max'))} ms"
            if released.get("count")
            else ""
        )
        + ".</p>"
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
            log=True,
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
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;border-top:1px solid #ddd;padding-top:16px}
figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:right}th{background:#f4f4f4}table.header td{text-align:left}
svg.chart{background:#fafafa;border:1px solid #eee;width:100%;height:auto}
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


def _header(summary: dict[str, Any]) -> str:
    """What the report covers: its time range, the ingested inputs and their torn tails."""
    firsts = [i["first_minute"] for i in summary["purgatories"].values() if i.get("first_minute")]
    lasts = [i["last_minute"] for i in summary["purgatories"].values() if i.get("last_minute")]
    span = f"{min(firsts)} to {max(lasts)} UTC" if firsts else "no activity"
    ingest = summary.get("ingest") or {}
    records = ingest.get("records") or {}
    inputs = ", ".join(ingest.get("journals") or []) or "(not recorded)"
    torn = ingest.get("torn_tails", 0)
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(records.items())) or "none"
    where = ": " + ", ".join(ingest.get("torn_segments") or []) if torn else ""
    rows = [
        ["time range", span],
        ["inputs", inputs],
        ["journal records", f"{sum(records.values()):,} ({kinds})"],
        ["torn tails skipped", f"{torn:,} ({ingest.get('torn_bytes', 0):,} bytes){where}"],
        ["purgatories", f"{len(summary['purgatories']):,}"],
    ]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="header">{body}</table>'


def render_html(summary: dict[str, Any]) -> str:
    """The report page for a JSON summary (see :func:`purgatory_pipeline.report.summarise`)."""
    sections = [_purgatory_section(n, i) for n, i in summary["purgatories"].items()]
    if not sections:
        sections = ["<p>No purgatory in the tables.</p>"]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>Purgatory operations report</title>"
        f"<style>{_STYLE}</style></head><body><h1>Purgatory operations report</h1>"
        + _header(summary)
        + "".join(sections)
        + f"<script>{_MEASURE}</script></body></html>\n"
    )
