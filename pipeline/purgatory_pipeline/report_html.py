"""The self-contained HTML report: inline SVG charts, no script or font from a CDN.

Why SVG generated in Python: the report must open offline (an operator's laptop, an air-
gapped host), and a few bar and line charts do not need a charting library; they are
drawn by :mod:`purgatory_pipeline.charts`. Every chart is an ``<svg class="chart">`` with a
``data-chart`` name; the page's only script measures each chart's drawn size after layout
into ``data-rendered-*`` attributes, which the browser test reads back (a chart that
rendered empty shows as 0).

Per purgatory the page has: the states table; over time (the summary's ``timeline``
buckets) arrivals and outcomes, the pending backlog, wait percentiles and late releases;
percentile bars of wait and timer precision; the top keys; N-acks latency per source.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from purgatory_pipeline.charts import Style, bar_chart, time_chart

# An expiry fired more than this after its deadline is counted as released late (downtime,
# a stall), not as timer precision; report.py splits the lateness summary by it.
LATE_RELEASE_MS = 500
# Each series its own colour, width, dash and marker; drawn widest first, so a line equal
# to another shows inside it (completed equal to arrivals, cancelled equal to forced).
OUTCOME_STYLES = {
    "arrivals": Style("#4e79a7", 7.0, "", "circle"),
    "completed": Style("#59a14f", 3.0, "8 4", "square"),
    "expired": Style("#e15759", 3.0, "3 3", "triangle"),
    "force_completed": Style("#f28e2b", 4.5, "", "diamond"),
    "cancelled": Style("#6b4c9a", 1.5, "5 3", "cross"),
}
WAIT_STYLES = {
    "p50": Style("#4e79a7", 5.0, "", "circle"),
    "p90": Style("#f28e2b", 3.0, "9 4", "square"),
    "p99": Style("#e15759", 1.8, "3 2", "triangle"),
}
BACKLOG = Style("#76b7b2", 2.5, "", "circle")
LATE = Style("#e15759", 0, "", "")


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def _moment(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def timeline_charts(slug: str, timeline: dict[str, Any]) -> list[str]:
    """The four time charts of one purgatory's ``timeline`` summary (see report.py)."""
    buckets = timeline.get("buckets") or []
    if not buckets or not timeline.get("bucket_ms"):
        return [
            time_chart(f"{slug}-{name}", title, [], timedelta(0), [], kind="counts", y_title="")
            for name, title in (
                ("activity", "Arrivals and outcomes"),
                ("backlog", "Pending operations"),
                ("wait-over-time", "Wait time of completed operations over time"),
                ("late-over-time", "Late releases over time"),
            )
        ]
    bucket = timedelta(milliseconds=int(timeline["bucket_ms"]))
    starts = [_moment(b["start"]) for b in buckets]
    size = _bucket_words(bucket)
    first, last = starts[0], starts[-1] + bucket
    span = f"{first:%Y-%m-%d %H:%M:%S} to {last:%Y-%m-%d %H:%M:%S} UTC"

    def column(name: str) -> list[float | None]:
        return [None if b.get(name) is None else float(b[name]) for b in buckets]

    return [
        time_chart(
            f"{slug}-activity",
            f"Arrivals and outcomes per {size} ({span})",
            starts,
            bucket,
            [(name, style, column(name)) for name, style in OUTCOME_STYLES.items()],
            kind="counts",
            y_title=f"operations per {size}",
        ),
        time_chart(
            f"{slug}-backlog",
            f"Pending operations (created, not yet ended) at the end of each {size}",
            starts,
            bucket,
            [("pending", BACKLOG, column("pending"))],
            kind="levels",
            y_title="pending operations",
        ),
        time_chart(
            f"{slug}-wait-over-time",
            f"Wait time of completed operations per {size}: p50, p90, p99 (log scale)",
            starts,
            bucket,
            [(q, style, column(f"wait_{q}_ms")) for q, style in WAIT_STYLES.items()],
            kind="samples",
            y_title="wait (ms, log)",
            log=True,
            unit="ms",
        ),
        time_chart(
            f"{slug}-late-over-time",
            f"Late releases per {size}: expiries fired more than {LATE_RELEASE_MS:,} ms after "
            "their deadline (a restart's downtime or a stalled server)",
            starts,
            bucket,
            [("late releases", LATE, column("late_releases"))],
            kind="columns",
            y_title=f"late releases per {size}",
        ),
    ]


def _bucket_words(bucket: timedelta) -> str:
    seconds = int(bucket.total_seconds())
    for size, one, many in (
        (604800, "week", "weeks"),
        (86400, "day", "days"),
        (3600, "hour", "hours"),
        (60, "minute", "minutes"),
        (1, "second", "seconds"),
    ):
        if seconds % size == 0:
            count = seconds // size
            return one if count == 1 else f"{count} {many}"
    return f"{seconds} seconds"


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
    parts += timeline_charts(slug, info.get("timeline") or {})
    parts.append(
        bar_chart(
            f"{slug}-wait",
            f"Wait time of completed operations (n={_num((info['wait_ms'] or {}).get('count'))})",
            _quantile_bars(info["wait_ms"]),
            "ms",
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
            "ms",
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
            "ms",
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
