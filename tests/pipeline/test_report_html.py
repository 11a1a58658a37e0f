"""The HTML report in a real headless Chromium: every chart drawn, no console error, a screenshot.

The screenshot is kept as a test artifact under ``test-artifacts/`` (ignored by git).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.pipeline.conftest import Workload

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
_SVG = re.compile(r"<svg [^>]*class=\"chart\"[^>]*>")
_ATTR = re.compile(r'data-([a-z-]+)="([^"]*)"')
_SVG_BLOCK = re.compile(r"<svg [^>]*class=\"chart\".*?</svg>", re.S)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "headless Chromium is not installed (Debian package 'chromium'; make test installs it)"
    )


def _run(args: list[str], page: Path) -> subprocess.CompletedProcess[str]:
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    base += ["--disable-extensions", "--enable-logging=stderr", "--v=0"]
    return subprocess.run(
        [*base, *args, page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_console_check_catches_errors(tmp_path: Path) -> None:
    """The console check below is not vacuous: a page with an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>console.error('x'); missing();</script></body></html>")
    assert len(_console(_run(["--dump-dom"], page).stderr)) == 2


def test_report_renders_every_chart_offline(reported: Workload, tmp_path: Path) -> None:
    page = reported.report_dir / "report.html"  # type: ignore[operator]
    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html  # self-contained: nothing from a CDN
    result = _run(["--dump-dom"], page)
    assert _console(result.stderr) == []
    dom = result.stdout
    assert 'data-measured="yes"' in dom
    charts = [dict(_ATTR.findall(tag)) for tag in _SVG.findall(dom)]
    names = {c["chart"] for c in charts}
    expected = {
        "d-per-minute",
        "d-wait",
        "d-lateness",
        "d-top-watches",
        "d-top-signals",
        "d-top-expirations",
        "d-acks",
    }
    assert names == expected
    for chart in charts:
        assert int(chart["rendered-width"]) > 0, chart
        assert int(chart["rendered-height"]) > 0, chart
        assert int(chart["rendered-marks"]) > 0, chart
    per_minute = next(t for t in _SVG_BLOCK.findall(dom) if 'data-chart="d-per-minute"' in t)
    assert 'data-axis="x"' in per_minute and 'data-axis="y"' in per_minute
    header = dom[dom.index('<table class="header">') :]
    header = header[: header.index("</table>")]
    assert "time range" in header and "torn tails skipped" in header
    assert "1 (37 bytes)" in header  # the workload's torn tail
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "pipeline-report.png"
    shot.unlink(missing_ok=True)
    _run([f"--screenshot={shot}", "--window-size=960,2600", "--hide-scrollbars"], page)
    assert shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_minute_chart_places_minutes_by_time_and_shows_gaps() -> None:
    from purgatory_pipeline.report_html import line_chart

    def minute(at: str, arrivals: int) -> dict[str, object]:
        return {"minute": f"2026-11-27T{at}:00", "arrivals": arrivals, "completed": 1}

    # Two busy minutes, six quiet hours, two more: by position they would look adjacent.
    svg = line_chart(
        "m", "t", [minute("10:00", 5), minute("10:01", 7), minute("16:01", 2), minute("16:02", 3)]
    )
    lines = re.findall(r'<polyline[^>]*points="([^"]*)"', svg)
    xs = sorted({float(p.split(",")[0]) for pts in lines for p in pts.split()})
    assert len(xs) == 4
    (a, b, c, d) = xs
    assert (c - b) > 100 * (b - a)  # 360 minutes apart vs 1 minute apart
    assert abs((d - c) - (b - a)) < 0.01
    assert 'class="gap"' in svg and "5 h 59 min quiet" in svg
    assert 'data-axis="x"' in svg and "operations per minute" in svg
    assert "16:02" in svg  # the last tick is the last minute's time


def test_percentile_bars_on_a_log_scale_keep_small_values_visible() -> None:
    from purgatory_pipeline.report_html import bar_chart

    svg = bar_chart("q", "t", [("p50", 3.0), ("p99", 30_000.0)], " ms", log=True)
    widths = [float(w) for w in re.findall(r'<rect [^>]*width="([0-9.]+)"', svg)]
    assert widths[0] > widths[1] / 10  # linear would make p50 1/10,000 of p99
    assert "log scale" in svg


def _tick_labels(svg: str) -> list[str]:
    return re.findall(r'<text [^>]*y="\d+" text-anchor="middle" font-size="11">([^<]+)</text>', svg)


def test_the_time_axis_labels_each_tick_with_its_own_minute() -> None:
    from purgatory_pipeline.report_html import line_chart

    def chart(*minutes: str) -> str:
        return line_chart(
            "m", "t", [{"minute": f"2026-11-27T{m}:00", "arrivals": 1} for m in minutes]
        )

    # A two-point line: two ticks, one per minute (not 18:12 four times, then 18:13).
    assert _tick_labels(chart("18:12", "18:13")) == ["18:12", "18:13"]
    assert _tick_labels(chart("18:12")) == ["18:12"]
    for last in ("18:15", "18:29", "19:42", "23:59"):
        labels = _tick_labels(chart("18:12", last))
        assert labels[0] == "18:12" and labels[-1] == last, labels
        assert len(labels) == len(set(labels)) and 2 <= len(labels) <= 6, labels
    assert _tick_labels(chart("10:00", "16:02")) == ["10:00", "12:00", "14:00", "16:02"]


def test_charts_use_the_page_width(tmp_path: Path) -> None:
    from purgatory_pipeline.report_html import _STYLE, line_chart

    svg = line_chart("m", "t", [{"minute": "2026-11-27T18:12:00", "arrivals": 1}])
    page = tmp_path / "page.html"
    page.write_text(
        f"<html><head><style>{_STYLE}</style></head><body>{svg}<script>"
        "var s = document.querySelector('svg.chart');"
        "s.setAttribute('data-client-width', Math.round(s.getBoundingClientRect().width));"
        "var f = s.parentElement.getBoundingClientRect().width;"
        "s.setAttribute('data-figure-width', Math.round(f));"
        "</script></body></html>"
    )
    dom = _run(["--dump-dom", "--window-size=1600,900"], page).stdout
    client = int(re.search(r'data-client-width="(\d+)"', dom)[1])  # type: ignore[index]
    figure = int(re.search(r'data-figure-width="(\d+)"', dom)[1])  # type: ignore[index]
    assert figure > 1200 and client >= figure - 4, (client, figure)  # not 760 px of 1400
