"""Inline SVG charts for the report: time axes, linear and log value axes, lines and bars.

Contracts (what the report relies on, and the tests check):

- **Width follows the page**: every chart is ``<svg width="100%" viewBox="0 0 WIDTH H">``;
  the browser scales it to its container, the aspect ratio stays.
- **Time ticks** (:func:`time_ticks`) fall on round UTC multiples of one step (1 s ... 1 day,
  weeks from Monday, calendar months); their labels are distinct and in time order: the
  format shows seconds when the step is under a minute, and every label carries its date
  when the axis crosses midnight (else the axis title names the one day).
- **Value axes** have gridlines and labelled ticks: linear ones from 0 to a round top in
  steps of 1, 2 or 5 x 10^k; log ones at each decade (and 2x, 5x when there are at most
  two decades), so 31 ms and 60 ms, or 1 s and 9 s, sit visibly apart.
- **Lines stay visible when equal**: each series has its own dash pattern, marker and
  width, and the widest is drawn first, so a line equal to another runs inside it; the
  legend gives each series' total.

Pure Python, no Spark: the report module feeds it collected summaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from html import escape
from itertools import pairwise
from math import ceil, floor, log10
from typing import Literal

__all__ = [
    "GAP",
    "WIDTH",
    "Style",
    "bar_chart",
    "bucket_ms",
    "compact",
    "duration_ms",
    "empty",
    "linear_ticks",
    "log_ticks",
    "time_chart",
    "time_ticks",
]

WIDTH = 960
_HEIGHT = 288
_LEFT, _RIGHT, _TOP, _BOTTOM = 78, 24, 40, 58
_GRID = "#e3e3e3"
_AXIS = "#888"
_MAX_TIME_TICKS = 8
# Up to this many buckets every point has its marker; beyond _DENSE lines are drawn thinner.
_DOTS, _DENSE = 40, 100
# A stretch without any bucket longer than this is shaded and labelled with its length.
GAP = timedelta(minutes=10)
# The most buckets a time chart has: the report picks the bucket size (bucket_ms) so the
# whole span fits, from one second to days (1 minute: 1 s; 1 hour: 30 s; 1 week: 1 h).
MAX_BUCKETS = 200
_BUCKET_STEPS_S: tuple[int, ...] = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    172800,
    604800,
)
_TICK_STEPS_S: tuple[int, ...] = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    14400,
    21600,
    43200,
)
_DAY = 86400
_WEEK_STEPS_D = (7, 14)
_MONTH_STEPS = (1, 2, 3, 6, 12, 24, 60, 120)
# Unix time 0 was a Thursday: weeks start 4 days later (on Monday).
_MONDAY_S = 4 * _DAY


@dataclass(frozen=True)
class Style:
    """How one series is drawn: colour, stroke width, dash pattern and point marker."""

    color: str
    width: float = 2.0
    dash: str = ""
    marker: Literal["circle", "square", "triangle", "diamond", "cross", ""] = "circle"


def bucket_ms(span_ms: float) -> int:
    """The round bucket (1 s, 2 s, 5 s ... 1 week) that covers ``span_ms`` in at most
    ``MAX_BUCKETS`` buckets."""
    for step in _BUCKET_STEPS_S:
        if span_ms / (step * 1000) <= MAX_BUCKETS:
            return step * 1000
    return _BUCKET_STEPS_S[-1] * 1000


# --- number formats ------------------------------------------------------------------


def _clean(value: float) -> float:
    return float(f"{value:.12g}")


def compact(value: float) -> str:
    """A tick label: 0, 5, 2.5, 1.5k, 20k, 3M."""
    value = _clean(value)
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{_clean(value / scale):g}{suffix}"
    return f"{value:g}"


def duration_ms(value: float) -> str:
    """A duration tick label from milliseconds: 0.5 ms, 20 ms, 1 s, 100 s, 16.7 min, 2.78 h."""
    value = _clean(value)
    if value < 1000:
        return f"{value:g} ms"
    if value < 1_000_000:
        return f"{_clean(value / 1000):g} s"
    if value < 36_000_000:
        return f"{value / 60_000:.3g} min"
    return f"{value / 3_600_000:.3g} h"


def _fmt_value(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


# --- ticks ---------------------------------------------------------------------------


def linear_ticks(top: float, *, integer: bool = True, most: int = 5) -> list[float]:
    """0 up to the first round multiple at or above ``top`` (at least one step), in steps of
    1, 2 or 5 x 10^k, at most ``most`` steps; ``integer`` keeps steps >= 1."""
    top = max(float(top), 1.0 if integer else 1e-9)
    magnitude = 10.0 ** floor(log10(top / most))
    step = next(m * magnitude for m in (1, 2, 5, 10) if top / (m * magnitude) <= most)
    if integer:
        step = max(step, 1.0)
    count = max(1, ceil(_clean(top / step)))
    return [_clean(i * step) for i in range(count + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks of a log axis from the decade at or below ``low`` to the one at or above
    ``high`` (``low`` > 0): every decade, and 2x and 5x of each when there are at most two."""
    lo = floor(log10(low))
    hi = max(ceil(log10(high)), lo + 1)
    ticks: list[float] = []
    for exponent in range(lo, hi + 1):
        base = 10.0**exponent
        ticks.append(_clean(base))
        if hi - lo <= 2 and exponent < hi:
            ticks += [_clean(2 * base), _clean(5 * base)]
    return ticks


def _month_ticks(lo: datetime, hi: datetime, months: int) -> list[datetime]:
    index = lo.year * 12 + lo.month - 1
    index = -(-index // months) * months
    ticks: list[datetime] = []
    while True:
        tick = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
        if tick > hi:
            return ticks
        if tick >= lo:
            ticks.append(tick)
        index += months


def _aligned(lo: datetime, hi: datetime, step_s: int, offset_s: int = 0) -> list[datetime]:
    start = ceil((lo.timestamp() - offset_s) / step_s) * step_s + offset_s
    end = hi.timestamp()
    return [datetime.fromtimestamp(t, UTC) for t in range(int(start), int(end) + 1, step_s)]


def _candidates(lo: datetime, hi: datetime, most: int) -> list[tuple[str, list[datetime]]]:
    """Tick sets from finest to coarsest, each with its unit (second, minute, day, month);
    steps that would give far more than ``most`` ticks are not listed."""
    span = (hi - lo).total_seconds()
    sets: list[tuple[str, list[datetime]]] = []
    steps = [("second" if s < 60 else "minute", s, 0) for s in _TICK_STEPS_S]
    steps += [("day", _DAY, 0), ("day", 2 * _DAY, 0)]
    steps += [("day", d * _DAY, _MONDAY_S) for d in _WEEK_STEPS_D]
    for unit, step, offset in steps:
        if span / step <= most:
            sets.append((unit, _aligned(lo, hi, step, offset)))
    for months in _MONTH_STEPS:
        if span / (months * 28 * _DAY) <= most:
            sets.append(("month", _month_ticks(lo, hi, months)))
    return sets


def time_ticks(
    lo: datetime, hi: datetime, most: int = _MAX_TIME_TICKS
) -> list[tuple[datetime, str]]:
    """Round ticks within [lo, hi] and their labels (distinct, in order; see the module)."""
    if hi <= lo:
        hi = lo + timedelta(seconds=1)
    sets = _candidates(lo, hi, most)
    unit, ticks = next(((u, t) for u, t in sets if 2 <= len(t) <= most), ("second", []))
    if len(ticks) < 2:  # a span shorter than a second, or longer than the coarsest step
        unit, ticks = "second", [lo, hi]
    crosses_day = lo.date() != (hi - timedelta(microseconds=1)).date()
    crosses_year = lo.year != hi.year
    date = "%Y-%m-%d" if crosses_year else "%b %d"
    labels = []
    for tick in ticks:
        if unit == "month":
            labels.append(tick.strftime("%b %Y"))
        elif unit == "day":
            labels.append(tick.strftime(date))
        else:
            clock = tick.strftime("%H:%M:%S" if unit == "second" else "%H:%M")
            labels.append(f"{clock}\n{tick.strftime(date)}" if crosses_day else clock)
    return list(zip(ticks, labels, strict=True))


def _day_title(lo: datetime, hi: datetime) -> str:
    if lo.date() == (hi - timedelta(microseconds=1)).date():
        return f"time (UTC), {lo.strftime('%Y-%m-%d')}"
    return "time (UTC)"


# --- SVG pieces ------------------------------------------------------------------------


def _svg(name: str, title: str, body: list[str], height: int) -> str:
    return (
        f"<figure><figcaption>{escape(title)}</figcaption>"
        f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{escape(title)}" '
        f'width="100%" viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="xMidYMid meet" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg></figure>'
    )


def empty(name: str, title: str, why: str) -> str:
    """A figure that says why there is no chart."""
    return (
        f'<figure class="empty" data-chart="{escape(name)}">'
        f"<figcaption>{escape(title)}</figcaption><p>{escape(why)}</p></figure>"
    )


def _text(x: float, y: float, text: str, *, anchor: str = "middle", cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<text{klass} x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="12">'
        f"{escape(text)}</text>"
    )


def _marker(kind: str, x: float, y: float, style: Style, size: float = 3.5) -> str:
    fill = f'fill="{style.color}"'
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}" {fill}/>'
    if kind == "square":
        s = size * 0.9
        return (
            f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}" '
            f"{fill}/>"
        )
    if kind in ("triangle", "diamond"):
        corners = (
            [(0, -1), (-1, 0.8), (1, 0.8)]
            if kind == "triangle"
            else [(0, -1), (1, 0), (0, 1), (-1, 0)]
        )
        pts = " ".join(f"{x + dx * size:.1f},{y + dy * size:.1f}" for dx, dy in corners)
        return f'<polygon points="{pts}" {fill}/>'
    if kind == "cross":
        s = size
        return (
            f'<path d="M{x - s:.1f},{y - s:.1f}L{x + s:.1f},{y + s:.1f}M{x - s:.1f},{y + s:.1f}'
            f'L{x + s:.1f},{y - s:.1f}" stroke="{style.color}" stroke-width="1.6"/>'
        )
    return ""


def _stroke(style: Style) -> str:
    dash = f' stroke-dasharray="{style.dash}"' if style.dash else ""
    return (
        f'fill="none" stroke="{style.color}" stroke-width="{style.width}"{dash} '
        'stroke-linejoin="round"'
    )


def _legend(entries: list[tuple[str, Style]], y: float = 18) -> list[str]:
    body = []
    x = float(_LEFT)
    for label, style in entries:
        if style.width:
            body.append(
                f'<line x1="{x:.1f}" y1="{y - 4}" x2="{x + 28:.1f}" y2="{y - 4}" {_stroke(style)}/>'
            )
        else:  # a series drawn as columns
            body.append(
                f'<rect x="{x + 7:.1f}" y="{y - 11}" width="14" height="12" fill="{style.color}"/>'
            )
        if style.marker:
            body.append(_marker(style.marker, x + 14, y - 4, style))
        body.append(_text(x + 34, y, label, anchor="start", cls="legend"))
        x += 44 + 7.0 * len(label)
    return body


class _ValueAxis:
    """The y axis: a linear or log scale from the plotted values, gridlines, tick labels."""

    def __init__(
        self,
        values: Sequence[float],
        top_px: float,
        bottom_px: float,
        *,
        log: bool,
        label: Callable[[float], str],
        integer: bool,
    ) -> None:
        self.top_px, self.bottom_px, self.log, self.label = top_px, bottom_px, log, label
        positive = [v for v in values if v > 0]
        if log:
            low = min(positive) if positive else 1.0
            high = max(positive) if positive else 10.0
            self.ticks = log_ticks(low, high)
            self.lo, self.hi = log10(self.ticks[0]), log10(self.ticks[-1])
        else:
            self.ticks = linear_ticks(max(values, default=0.0), integer=integer)
            self.lo, self.hi = 0.0, self.ticks[-1]

    def y(self, value: float) -> float:
        if self.log:
            share = (log10(value) - self.lo) / (self.hi - self.lo) if value > 0 else 0.0
        else:
            share = (value - self.lo) / (self.hi - self.lo)
        share = min(max(share, 0.0), 1.0)
        return self.bottom_px - (self.bottom_px - self.top_px) * share

    def draw(self, left: float, right: float) -> list[str]:
        body = []
        for tick in self.ticks:
            ty = self.y(tick)
            body.append(
                f'<line class="grid" x1="{left}" y1="{ty:.1f}" x2="{right}" y2="{ty:.1f}" '
                f'stroke="{_GRID}"/>'
            )
            body.append(
                f'<text class="y-tick" x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end" '
                f'font-size="11">{escape(self.label(tick))}</text>'
            )
        return body


# --- the time chart ----------------------------------------------------------------------

Kind = Literal["counts", "samples", "levels", "columns"]


def time_chart(
    name: str,
    title: str,
    starts: Sequence[datetime],
    bucket: timedelta,
    series: Sequence[tuple[str, Style, Sequence[float | None]]],
    *,
    kind: Kind,
    y_title: str,
    log: bool = False,
    unit: str = "",
) -> str:
    """Series over time buckets (``starts``, sorted, each ``bucket`` long), on a time axis.

    ``kind`` says what a bucket without a row means: ``counts`` (nothing happened: the
    line falls to 0 in it), ``samples`` (no value: the line breaks), ``levels`` (the level
    held: a step line carries it on) or ``columns`` (a count, drawn as a bar per bucket).
    A value of None in a series is treated as a missing bucket. Stretches without any
    bucket longer than :data:`GAP` are shaded and labelled with their length.
    """
    if not starts:
        return empty(name, title, "no data")
    lo, hi = starts[0], starts[-1] + bucket
    left, right = _LEFT, WIDTH - _RIGHT
    top_px, bottom_px = _TOP, _HEIGHT - _BOTTOM
    span_s = (hi - lo).total_seconds()

    def x(t: datetime) -> float:
        return left + (right - left) * (t - lo).total_seconds() / span_s

    plotted = [float(v) for _, _, vs in series for v in vs if v is not None]
    label = duration_ms if unit == "ms" else compact
    axis = _ValueAxis(plotted, top_px, bottom_px, log=log, label=label, integer=kind != "samples")
    body = axis.draw(left, right)
    for tick, text in time_ticks(lo, hi):
        tx = x(tick)
        body.append(
            f'<line class="grid" x1="{tx:.1f}" y1="{top_px}" x2="{tx:.1f}" y2="{bottom_px}" '
            f'stroke="{_GRID}"/>'
        )
        lines = text.split("\n")
        tspans = "".join(
            f'<tspan x="{tx:.1f}" dy="{0 if i == 0 else 13}">{escape(line)}</tspan>'
            for i, line in enumerate(lines)
        )
        body.append(
            f'<text class="x-tick" x="{tx:.1f}" y="{bottom_px + 16}" text-anchor="middle" '
            f'font-size="11">{tspans}</text>'
        )
    frame = _Frame(starts, bucket, x, axis)
    body += _gaps(frame, top_px, bottom_px)
    body.append(
        f'<line x1="{left}" y1="{bottom_px}" x2="{right}" y2="{bottom_px}" stroke="{_AXIS}"/>'
    )
    body.append(f'<line x1="{left}" y1="{top_px}" x2="{left}" y2="{bottom_px}" stroke="{_AXIS}"/>')
    body.append(
        f'<text class="axis-title" data-axis="x" x="{(left + right) / 2:.0f}" '
        f'y="{_HEIGHT - 6}" text-anchor="middle" font-size="12">'
        f"{escape(_day_title(lo, hi))}, buckets of {escape(_bucket_name(bucket))}</text>"
    )
    mid = (top_px + bottom_px) / 2
    body.append(
        f'<text class="axis-title" data-axis="y" x="16" y="{mid:.0f}" text-anchor="middle" '
        f'font-size="12" transform="rotate(-90 16 {mid:.0f})">{escape(y_title)}</text>'
    )
    ordered = sorted(series, key=lambda s: -s[1].width)  # widest first: equal lines nest
    dots = len(starts) <= _DOTS
    thin = 1.0 if len(starts) <= _DENSE else 0.7
    for _, style, values in ordered:
        drawn = replace(style, width=round(style.width * thin, 2))
        if kind == "columns":
            body += _columns(frame, values, drawn)
        else:
            body += _line(frame, values, drawn, kind, dots=dots)
    legend = []
    for text, style, values in series:
        total = sum(v for v in values if v is not None)
        shown = f"{text} ({_fmt_value(total)})" if kind in ("counts", "columns") else text
        legend.append((shown, style))
    body += _legend(legend)
    return _svg(name, title, body, _HEIGHT)


def _bucket_name(bucket: timedelta) -> str:
    seconds = int(bucket.total_seconds())
    for size, unit in ((604800, "week"), (86400, "day"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds % size == 0:
            count = seconds // size
            if unit in ("week", "day"):
                return f"{count} {unit}{'s' if count > 1 else ''}"
            return f"{count} {unit}"
    return f"{seconds} s"


def _duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else ""]
    parts.append(f"{rest} min" if rest or not (days or hours) else "")
    return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class _Frame:
    """A time chart's buckets and scales: where a time and a value are drawn."""

    starts: Sequence[datetime]
    bucket: timedelta
    x: Callable[[datetime], float]
    axis: _ValueAxis


def _gaps(frame: _Frame, top_px: float, bottom_px: float) -> list[str]:
    body = []
    for before, after in pairwise(frame.starts):
        quiet = after - (before + frame.bucket)
        if quiet <= GAP:
            continue
        x0, x1 = frame.x(before + frame.bucket), frame.x(after)
        text = _duration(quiet)
        body.append(
            f'<rect class="gap" x="{x0:.1f}" y="{top_px}" width="{max(x1 - x0, 1):.1f}" '
            f'height="{bottom_px - top_px}" fill="#eee"><title>{text} without arrivals or '
            "outcomes</title></rect>"
        )
        body.append(
            f'<text x="{(x0 + x1) / 2:.1f}" y="{top_px + 14}" text-anchor="middle" '
            f'font-size="10" fill="#666">{escape(text)} quiet</text>'
        )
    return body


def _runs(
    frame: _Frame, values: Sequence[float | None], kind: Kind
) -> list[list[tuple[float, float]]]:
    """The polylines' points: one per bucket with a value (see :func:`time_chart` for what
    a bucket without one means). A level is the value at the bucket's end; a count or a
    sample belongs to the bucket's middle."""
    bucket, x, axis = frame.bucket, frame.x, frame.axis
    at = bucket if kind == "levels" else bucket / 2
    runs: list[list[tuple[float, float]]] = [[]]
    previous: datetime | None = None
    for start, value in zip(frame.starts, values, strict=True):
        if value is None:
            if kind == "samples":
                runs.append([])
            continue
        point = (x(start + at), axis.y(float(value)))
        silent = previous is not None and start - previous > bucket and runs[-1]
        if silent and kind == "samples":
            runs.append([])
        elif silent and kind == "counts" and previous is not None:
            zero = axis.y(0.0)  # nothing happened: zero just after the last, and before this
            runs[-1] += [(x(previous + bucket + at), zero), (x(start - at), zero)]
        if kind == "levels" and runs[-1]:
            runs[-1].append((point[0], runs[-1][-1][1]))  # hold the level, then step
        runs[-1].append(point)
        previous = start
    return runs


def _line(
    frame: _Frame, values: Sequence[float | None], style: Style, kind: Kind, *, dots: bool
) -> list[str]:
    """One series as polylines, with a marker per point when ``dots`` (and for a lone one)."""
    body = []
    for run in _runs(frame, values, kind):
        if len(run) == 1 and not dots:
            body.append(_marker(style.marker or "circle", *run[0], style))
        elif len(run) > 1:
            points = " ".join(f"{px:.1f},{py:.1f}" for px, py in run)
            body.append(f'<polyline {_stroke(style)} points="{points}"/>')
    if dots and style.marker:
        at = frame.bucket if kind == "levels" else frame.bucket / 2
        for start, value in zip(frame.starts, values, strict=True):
            if value is not None:
                py = frame.axis.y(float(value))
                body.append(_marker(style.marker, frame.x(start + at), py, style))
    return body


def _columns(frame: _Frame, values: Sequence[float | None], style: Style) -> list[str]:
    body = []
    zero = frame.axis.y(0.0)
    for start, value in zip(frame.starts, values, strict=True):
        if not value:
            continue
        x0, x1 = frame.x(start), frame.x(start + frame.bucket)
        top = frame.axis.y(float(value))
        width = max(x1 - x0 - 0.5, 1.5)
        body.append(
            f'<rect class="column" x="{x0:.1f}" y="{top:.1f}" width="{width:.1f}" '
            f'height="{max(zero - top, 1):.1f}" fill="{style.color}">'
            f"<title>{start.strftime('%Y-%m-%d %H:%M:%S')}: {_fmt_value(value)}</title></rect>"
        )
    return body


# --- horizontal bars ---------------------------------------------------------------------


def bar_chart(
    name: str,
    title: str,
    bars: Sequence[tuple[str, float | None]],
    unit: str = "",
    *,
    log: bool = False,
    color: str = "#4e79a7",
) -> str:
    """Horizontal bars with a value axis below them (gridlines, labelled ticks); ``log``
    puts the lengths on a log scale (decade ticks), each bar still labelled with its value.
    ``unit`` "ms" labels ticks as durations."""
    shown = [(label, float(v)) for label, v in bars if v is not None]
    if not shown:
        return empty(name, title, "no data")
    label_w, right = 210, WIDTH - 110
    top_px = 10
    bottom_px = top_px + 28 * len(shown)
    height = bottom_px + 44
    values = [v for _, v in shown]
    positive = [v for v in values if v > 0]
    if log:
        ticks = log_ticks(min(positive, default=1.0), max(positive, default=10.0))
        lo, hi = log10(ticks[0]), log10(ticks[-1])

        def share(v: float) -> float:
            return (log10(v) - lo) / (hi - lo) if v > 0 else 0.0

    else:
        ticks = linear_ticks(max(values), integer=all(v.is_integer() for v in values))

        def share(v: float) -> float:
            return v / ticks[-1]

    def x(v: float) -> float:
        return label_w + (right - label_w) * min(max(share(v), 0.0), 1.0)

    fmt = duration_ms if unit == "ms" else compact
    body = []
    for tick in ticks:
        tx = x(tick)
        body.append(
            f'<line class="grid" x1="{tx:.1f}" y1="{top_px}" x2="{tx:.1f}" y2="{bottom_px}" '
            f'stroke="{_GRID}"/>'
        )
        body.append(
            f'<text class="x-tick" x="{tx:.1f}" y="{bottom_px + 15}" text-anchor="middle" '
            f'font-size="11">{escape(fmt(tick))}</text>'
        )
    for i, (label, value) in enumerate(shown):
        y = top_px + 4 + i * 28
        width = max(x(value) - label_w, 1.0)
        body.append(_text(label_w - 8, y + 15, label[:32], anchor="end"))
        body.append(
            f'<rect class="bar" x="{label_w}" y="{y}" width="{width:.1f}" height="20" '
            f'fill="{color}"/>'
        )
        suffix = f" {unit}" if unit else ""
        body.append(
            _text(label_w + width + 6, y + 15, f"{_fmt_value(value)}{suffix}", anchor="start")
        )
    body.append(
        f'<line x1="{label_w}" y1="{bottom_px}" x2="{right}" y2="{bottom_px}" stroke="{_AXIS}"/>'
    )
    scale = "log scale" if log else "linear scale"
    body.append(
        f'<text class="axis-title" data-axis="x" x="{(label_w + right) / 2:.0f}" '
        f'y="{height - 6}" text-anchor="middle" font-size="11" fill="#666">'
        f"{escape(scale)} ({escape(unit or 'count')})</text>"
    )
    return _svg(name, title, body, height)
