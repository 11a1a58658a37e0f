"""The report's SVG charts (purgatory_pipeline.charts), unit-level: no Spark, no browser.

Time axes for spans of 1 minute, 1 hour, 10 hours across midnight and 1 week: tick labels
distinct, in time order, on round times, each placed where its time is; value axes with
labelled ticks and gridlines, log axes with decade ticks; equal series stay visible.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from purgatory_pipeline import charts
from purgatory_pipeline.charts import Style, bar_chart, bucket_ms, time_chart

START = datetime(2026, 11, 27, 18, 4, 13, 457000, tzinfo=UTC)  # not on a round time
_X_TICK = re.compile(r'<text class="x-tick" x="([0-9.]+)"[^>]*>(.*?)</text>')
_TSPAN = re.compile(r"<tspan[^>]*>([^<]*)</tspan>")
_Y_TICK = re.compile(r'<text class="y-tick" x="[0-9.]+" y="([0-9.]+)"[^>]*>([^<]+)</text>')


def _buckets(span: timedelta) -> tuple[list[datetime], timedelta]:
    size = bucket_ms(span.total_seconds() * 1000)
    first = int(START.timestamp() * 1000) // size * size
    last = int((START + span).timestamp() * 1000)
    starts = [datetime.fromtimestamp(t / 1000, UTC) for t in range(first, last + 1, size)]
    return starts, timedelta(milliseconds=size)


def _chart(span: timedelta, values: list[float] | None = None) -> tuple[str, list[datetime]]:
    starts, bucket = _buckets(span)
    cycle = values or [float(i) for i in range(7)]
    counts = [cycle[i % len(cycle)] for i in range(len(starts))]
    svg = time_chart(
        "c", "t", starts, bucket, [("a", Style("#000"), counts)], kind="counts", y_title="n"
    )
    return svg, [starts[0], starts[-1] + bucket]


def _x_ticks(svg: str) -> list[tuple[float, str]]:
    return [(float(x), " ".join(_TSPAN.findall(inner))) for x, inner in _X_TICK.findall(svg)]


def _parse(label: str, year: int) -> datetime:
    for fmt in ("%H:%M:%S", "%H:%M", "%H:%M %b %d", "%b %d"):
        try:
            parsed = datetime.strptime(label, fmt)
        except ValueError:
            continue
        if "%b" not in fmt:
            parsed = parsed.replace(year=START.year, month=START.month, day=START.day)
        return parsed.replace(year=year, tzinfo=UTC)
    raise AssertionError(f"unexpected tick label {label!r}")


@pytest.mark.parametrize(
    ("span", "step"),
    [
        (timedelta(minutes=1), timedelta(seconds=10)),
        (timedelta(hours=1), timedelta(minutes=10)),
        (timedelta(hours=10), timedelta(hours=2)),  # crosses midnight: dates on the labels
        (timedelta(weeks=1), timedelta(days=1)),
    ],
    ids=["1-minute", "1-hour", "10-hours-over-midnight", "1-week"],
)
def test_time_ticks_are_distinct_ordered_round_and_placed_by_time(
    span: timedelta, step: timedelta
) -> None:
    svg, (lo, hi) = _chart(span)
    ticks = _x_ticks(svg)
    labels = [label for _, label in ticks]
    assert 3 <= len(labels) <= 8, labels
    assert len(set(labels)) == len(labels), labels  # not "18:04, 18:04, 18:04, 18:05"
    times = [_parse(label, START.year) for label in labels]
    assert times == sorted(times) and all(lo <= t <= hi for t in times), labels
    for t in times:  # round multiples of the step (UTC), not the first bucket's odd minute
        assert (t - datetime(2026, 1, 1, tzinfo=UTC)) % step == timedelta(0), (t, step)
    assert [b - a for a, b in pairwise(times)] == [step] * (len(times) - 1)
    crosses_midnight = lo.date() != hi.date()
    assert crosses_midnight == any(" " in label or label[0].isalpha() for label in labels)
    # Each label sits where its time is on the axis (the plot spans the whole domain).
    left, right = charts._LEFT, charts.WIDTH - charts._RIGHT
    for (x, _), t in zip(ticks, times, strict=True):
        expected = left + (right - left) * (t - lo) / (hi - lo)
        assert abs(x - expected) < 0.2, (x, expected)
    xs = [x for x, _ in ticks]
    assert xs == sorted(xs)
    if not crosses_midnight:  # the one day is named in the axis title
        assert f"time (UTC), {lo:%Y-%m-%d}" in svg


def test_bucket_sizes_follow_the_span() -> None:
    assert bucket_ms(60_000) == 1_000
    assert bucket_ms(3_600_000) == 30_000
    assert bucket_ms(7 * 86_400_000) == 3_600_000
    for span in (1, 59_999, 3_600_000, 86_400_000, 30 * 86_400_000):
        assert span / bucket_ms(span) <= charts.MAX_BUCKETS


def test_value_axis_has_labelled_ticks_and_gridlines() -> None:
    svg, _ = _chart(timedelta(minutes=1), [0.0, 3.0, 7.0, 12.0, 9.0])
    labels = [label for _, label in _Y_TICK.findall(svg)]
    assert labels == ["0", "5", "10", "15"], labels  # not only 0 and the maximum
    ys = [float(y) for y, _ in _Y_TICK.findall(svg)]
    assert ys == sorted(ys, reverse=True)
    assert svg.count('class="grid"') >= len(labels) + 3  # horizontal and vertical lines


def test_log_axes_have_ticks_that_separate_close_and_far_values() -> None:
    assert charts.log_ticks(31, 60) == [10, 20, 50, 100]
    assert charts.log_ticks(1031, 9360) == [1000, 2000, 5000, 10000]
    svg = bar_chart("q", "t", [("p50", 31.0), ("p99", 60.0)], "ms", log=True)
    ticks = [re.sub(r"<[^>]+>", "", inner) for _, inner in _X_TICK.findall(svg)]
    assert ticks == ["10 ms", "20 ms", "50 ms", "100 ms"]
    wide = bar_chart("q", "t", [("p50", 1031.0), ("p99", 9360.0)], "ms", log=True)
    widths = [float(w) for w in re.findall(r'class="bar" [^>]*width="([0-9.]+)"', wide)]
    # One decade axis: 1,031 ms near its start, 9,360 ms near its end (not 75% vs 100%).
    assert widths[0] < 0.05 * widths[1], widths
    assert "1 s" in wide and "10 s" in wide and "log scale" in wide


def test_equal_series_stay_visible() -> None:
    starts, bucket = _buckets(timedelta(minutes=1))
    same = [1.0] * len(starts)
    wide, narrow = Style("#111", 5.0, "", "circle"), Style("#222", 1.5, "3 2", "cross")
    svg = time_chart(
        "c",
        "t",
        starts,
        bucket,
        [("b", narrow, same), ("a", wide, same)],
        kind="counts",
        y_title="n",
    )
    lines = re.findall(r'<polyline fill="none" stroke="(#\d+)" stroke-width="([0-9.]+)"', svg)
    assert [color for color, _ in lines] == ["#111", "#222"]  # widest first, the other inside
    assert 'stroke-dasharray="3 2"' in svg
    assert "a (61)" in svg and "b (61)" in svg  # the legend gives totals


def test_a_bucket_without_a_row_means_zero_no_value_or_the_same_level() -> None:
    t0 = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    starts = [
        t0,
        t0 + timedelta(minutes=1),
        t0 + timedelta(hours=6),
        t0 + timedelta(hours=6, minutes=1),
    ]
    minute = timedelta(minutes=1)

    def points(kind: charts.Kind) -> list[list[str]]:
        svg = time_chart(
            "c",
            "t",
            starts,
            minute,
            [("a", Style("#000"), [5.0, 7.0, 2.0, 3.0])],
            kind=kind,
            y_title="n",
        )
        return [p.split() for p in re.findall(r'<polyline [^>]*points="([^"]*)"', svg)]

    [counts] = points("counts")  # falls to zero over the quiet hours
    assert len(counts) == 6
    assert len(points("samples")) == 2  # breaks
    [levels] = points("levels")  # holds the level, then steps
    assert len(levels) == 7
    backlog = time_chart(
        "c",
        "t",
        starts[:2],
        minute,
        [("a", Style("#000"), [2.0, 1.0])],
        kind="levels",
        y_title="n",
    )
    assert [label for _, label in _Y_TICK.findall(backlog)] == ["0", "1", "2"]  # whole counts
    svg = time_chart(
        "c", "t", starts, minute, [("a", Style("#000"), [1.0] * 4)], kind="counts", y_title="n"
    )
    assert 'class="gap"' in svg and "5 h 58 min quiet" in svg


def test_charts_scale_with_the_page() -> None:
    svg, _ = _chart(timedelta(hours=1))
    tag = svg[svg.index("<svg") : svg.index(">", svg.index("<svg"))]
    assert 'width="100%"' in tag and f'viewBox="0 0 {charts.WIDTH} ' in tag
    assert "height=" not in tag.replace("viewBox", "")
