"""The HTML report in a real headless Chromium: every chart drawn, no console error, a screenshot.

The screenshot is kept as a test artifact under ``test-artifacts/`` (ignored by git).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
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
        "d-activity",
        "d-backlog",
        "d-wait-over-time",
        "d-late-over-time",
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
    activity = next(t for t in _SVG_BLOCK.findall(dom) if 'data-chart="d-activity"' in t)
    assert 'data-axis="x"' in activity and 'data-axis="y"' in activity
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


def test_timeline_counts_every_operation_once(reported: Workload) -> None:
    from tests.pipeline import oracle

    info = reported.report["purgatories"]["d"]  # type: ignore[index]
    timeline = info["timeline"]
    buckets = timeline["buckets"]
    ops = oracle.operations(reported.oracle.records).values()
    states = Counter(op["state"] for op in ops)
    # The workload spans seconds: one-second buckets, at round seconds, in order.
    assert timeline["bucket_ms"] == 1000
    starts = [b["start"] for b in buckets]
    assert starts == sorted(set(starts)) and not [s for s in starts if "." in s]
    assert sum(b["arrivals"] for b in buckets) == len(ops)
    for state in ("COMPLETED", "EXPIRED", "FORCE_COMPLETED", "CANCELLED"):
        assert sum(b[state.lower()] for b in buckets) == states[state], state
    # The backlog ends at the operations still pending, and never goes below zero.
    assert buckets[-1]["pending"] == states["WATCHING"] > 0
    assert min(b["pending"] for b in buckets) >= 0
    late = info["late_releases_ms"]["count"]
    assert late > 0 and sum(b["late_releases"] for b in buckets) == late
    assert max(b["late_max_ms"] or 0 for b in buckets) == info["late_releases_ms"]["max"]
    waits = [b["wait_p99_ms"] for b in buckets if b["completed"]]
    assert waits and all(w is not None for w in waits)


def test_charts_use_the_page_width(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from purgatory_pipeline.charts import Style, time_chart
    from purgatory_pipeline.report_html import _STYLE

    start = datetime(2026, 11, 27, 18, 12, tzinfo=UTC)
    svg = time_chart(
        "m",
        "t",
        [start],
        timedelta(seconds=1),
        [("a", Style("#000"), [1.0])],
        kind="counts",
        y_title="n",
    )
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
