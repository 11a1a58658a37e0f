"""SVG charts drawn from the sampled counters: lines over the last minutes, and bars.

Served as ``image/svg+xml`` and shown in ``<img>``, where an SVG runs no script; every
label is escaped all the same. Axes are labelled with units.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from purgatory_server._service.console.figures import FINAL_STATES, WINDOW_S, LocalFigures, Sample
from purgatory_server._service.console.markup import Html, age, esc, join

__all__ = ["lateness_chart", "outcomes_chart", "pending_chart"]

W, H = 600, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 24, 28
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")


def _frame(body: Html, y_max: float, y_unit: str, x_label: str) -> bytes:
    plot_h = H - TOP - BOTTOM
    ticks = []
    for i in range(5):
        value = y_max * i / 4
        y = TOP + plot_h - plot_h * i / 4
        ticks.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{value:.3g}</text>'
        )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">'
        "<style>.grid{stroke:#e5e7eb}text{fill:#374151}</style>"
        f'<rect width="{W}" height="{H}" fill="#fff"/>{"".join(ticks)}'
        f'<text x="8" y="14">{esc(y_unit)}</text>'
        f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 6}" text-anchor="middle">'
        f"{esc(x_label)}</text>{body}</svg>"
    )
    return svg.encode("utf-8")


def _lines(series: Sequence[tuple[str, list[tuple[float, float]]]], span_s: float) -> Html:
    """Polylines of (seconds ago, value) and their legend; ``y`` scaled to the largest."""
    y_max = max([v for _, pts in series for _, v in pts] + [1.0])
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    out = []
    for i, (label, points) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(
            f"{LEFT + plot_w * (1 - ago / span_s):.1f},{TOP + plot_h * (1 - v / y_max):.1f}"
            for ago, v in points
        )
        ly = TOP + 14 * i + 8
        out.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{coords}"/>'
            f'<rect x="{W - RIGHT + 8}" y="{ly - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{W - RIGHT + 22}" y="{ly + 1}">{esc(label[:20])}</text>'
        )
    return join(Html(s) for s in out)


def _y_max(series: Sequence[tuple[str, list[tuple[float, float]]]]) -> float:
    return max([v for _, pts in series for _, v in pts] + [1.0])


def _span(samples: list[Sample]) -> tuple[float, str]:
    """The x axis: the samples' age, at least a minute, at most their whole window."""
    age_s = samples[-1].at - samples[0].at if samples else 0.0
    span = min(max(age_s, 60.0), float(WINDOW_S))
    return span, f"last {span / 60:.0f} min" if span >= 120 else f"last {span:.0f} s"


def pending_chart(samples: list[Sample]) -> bytes:
    """Pending operations per purgatory over the samples' window."""
    span_s, label = _span(samples)
    now = samples[-1].at if samples else 0.0
    names = sorted({n for s in samples for n in s.pending})
    series = [
        (n, [(now - s.at, float(s.pending[n])) for s in samples if n in s.pending]) for n in names
    ]
    return _frame(_lines(series, span_s), _y_max(series), "operations", label)


def outcomes_chart(samples: list[Sample]) -> bytes:
    """Outcomes per second by final state (all purgatories), between consecutive samples."""
    span_s, label = _span(samples)
    now = samples[-1].at if samples else 0.0
    series: list[tuple[str, list[tuple[float, float]]]] = []
    for i, state in enumerate(FINAL_STATES):
        points = []
        for a, b in pairwise(samples):
            dt = max(b.at - a.at, 1e-3)
            total = sum(
                b.outcomes[n][i] - a.outcomes.get(n, (0,) * len(FINAL_STATES))[i]
                for n in b.outcomes
                if b.outcomes[n] and a.outcomes.get(n)
            )
            points.append((now - b.at, max(total, 0) / dt))
        series.append((state.name.lower(), points))
    return _frame(_lines(series, span_s), _y_max(series), "outcomes /s", label)


def lateness_chart(local: LocalFigures | None) -> bytes:
    """Expiry lateness histogram: how many expiries fired within each bucket."""
    if local is None or local.lateness is None:
        return _frame(Html(""), 1.0, "expiries", "lateness (not measured here)")
    counts = local.lateness.bucket_counts
    bounds = local.lateness_bounds
    labels = [f"≤ {age(b)}" for b in bounds] + [f"> {age(bounds[-1])}" if bounds else "all"]
    y_max = float(max([*counts, 1]))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    bar_w = plot_w / max(len(counts), 1)
    bars = []
    for i, (count, label) in enumerate(zip(counts, labels, strict=True)):
        h = plot_h * count / y_max
        x = LEFT + i * bar_w
        bars.append(
            f'<rect x="{x + 2:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w - 4:.1f}" '
            f'height="{h:.1f}" fill="#2563eb"><title>{esc(label)}: {count}</title></rect>'
        )
        if i % 2 == 0:
            bars.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{TOP + plot_h + 12}" text-anchor="middle"'
                f' font-size="9">{esc(label)}</text>'
            )
    return _frame(join(Html(b) for b in bars), y_max, "expiries", "")
