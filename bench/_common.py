"""Helpers shared by the benchmarks: tables, percentiles, JSON results, run context, and
the purgatory server process every service benchmark measures.

Why a module: the benchmarks report the same way (a markdown table on stdout, the raw
numbers as JSON), and all record the machine's state next to the numbers, because on a
shared 2-core machine a number without the load average it was measured under is not
worth much.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import PURGATORY_SERVER, ServerProcess

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# A gRPC channel option: this channel gets its own connection instead of sharing one
# subchannel with every other channel to the same target in this process.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def first_module(*names: str) -> Any:
    """The first of ``names`` that imports, else None: a module another source tree (a
    ``--compare-src`` one, before or after a move) keeps under another name."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def tree_pythonpath(src: str) -> str:
    """``PYTHONPATH`` that runs the server (and engine) of source tree ``src`` instead of
    this one: ``--compare-src`` (e.g. ``git archive <commit> | tar -x -C DIR``)."""
    src = os.path.abspath(src)
    return f"{src}/server{os.pathsep}{src}/proto"


def bench_server(
    root: Path,
    label: str,
    *args: str,
    data_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    command: Sequence[str] = PURGATORY_SERVER,
    start_timeout_s: float = 30.0,
) -> ServerProcess:
    """A purgatory server process (not started) as the benchmarks run it: warnings only
    in its log, ``data_dir`` (default: its own empty one, never a developer's ./data)."""
    data = data_dir if data_dir is not None else root / f"{label}-data"
    own = ["--log-level", "WARNING", "--data-dir", str(data)]
    return ServerProcess(
        root,
        [*own, *args],
        label=label,
        env=env,
        command=command,
        start_timeout_s=start_timeout_s,
    )


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of an already sorted sequence, nearest-rank; NaN if empty."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def ratio(value: float, base: float) -> float:
    """``value / base``, NaN where ``base`` is 0 (a tiny sample, e.g. a smoke run's, can
    count nothing in its window): no ZeroDivisionError, and :func:`times` prints ``-``."""
    return value / base if base else float("nan")


def times(ratios: Sequence[float]) -> str:
    """The median of ``ratios`` as ``1.23x``; ``-`` if there is none or one is NaN."""
    if not ratios or any(math.isnan(r) for r in ratios):
        return "-"
    ordered = sorted(ratios)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return f"{median:.2f}x"


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
