"""Helpers shared by the benchmarks: tables, percentiles, JSON results, run context.

Why a module: both benchmarks report the same way (a markdown table on stdout, the raw
numbers as JSON), and both record the machine's state next to the numbers, because on a
shared 2-core machine a number without the load average it was measured under is not
worth much.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of an already sorted sequence, nearest-rank; NaN if empty."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table; numbers are right-aligned."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]
    lines = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---:" if n else "---" for n in numeric) + " |",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in cells)
    return "\n".join(lines)


def run_context() -> dict[str, Any]:
    """What the numbers were measured on: interpreter, CPUs and load at the start."""
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": [round(x, 2) for x in load],
        "switch_interval_s": sys.getswitchinterval(),
        "started_unix": int(time.time()),
    }


def write_json(name: str, payload: dict[str, Any], path: str | None) -> Path:
    """Write ``payload`` to ``path`` or ``bench/results/<name>-<timestamp>.json``."""
    if path is None:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        out = RESULTS_DIR / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    else:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return out
