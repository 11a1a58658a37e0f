"""Pipeline benchmark: ingest of an N-record journal, Spark local[1] / local[2] vs plain Python.

Same run, same files, one after the other:

- ``plain``: one Python process decodes every segment with the pipeline's decoder
  (``purgatory_pipeline.records.decode_segment``: frame checks, protobuf parse, Arrow
  batches), no Spark: the single-process baseline.
- ``duckdb``: what a user would pick instead on one machine: the same decoder writing each
  segment's records to Parquet, then DuckDB building the same three tables
  (``bench._pipeline_duckdb``; its rows equal ``ingest``'s, checked in benchmarks §10.1h).
- ``scan local[N]``: ``spark.read.format("purgatory-journal")`` grouped by kind (decode only).
- ``ingest local[N]``: the whole ``purgatory-pipeline ingest --full`` (decode into
  ``_records``, three tables, Parquet) into a fresh directory.
- ``incremental local[2]``: one segment is added to the journal (``append_segment``, the
  average segment's number of records, the same purgatory, its first record moving the
  deadline of an operation the last segment registered) and ``ingest`` runs again over
  ``ingest local[2]``'s output, decoding only that segment and rewriting the partitions
  it changes; the added segment is removed afterwards.

Spark runs with its default driver memory (1 GiB) unless ``--driver-memory`` says
otherwise; each run's stderr is searched for ``OutOfMemoryError``.

The ingest runs log their steps (``--log-level INFO``); the time from one step's line to
the next is printed per step (``decode``, ``write signals``, ``write events``, ``write
operations``, ...): where a run's time goes. The ratios the targets are about are printed
last (same run).

Each runs in a fresh subprocess; wall time is end to end (including the JVM start for
Spark). Peak RSS is sampled from /proc every 0.2 s: ``driver`` is the Python driver plus
its JVM (which in local mode also hosts the executor threads); ``workers`` is the sum of the
Python worker processes Spark forks to decode.

``python -m bench.pipeline_bench [--records 10000000] [--dir /tmp/pipeline-bench]
[--segment-mb 64] [--only plain,duckdb,scan1,scan2,ingest1,ingest2,incr2]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.pipeline_journal import append_segment, write_journal_sized

PLAIN = """
import sys, pathlib
from purgatory_pipeline.records import decode_segment
n = 0
segs = sorted(pathlib.Path(sys.argv[1]).glob("*.seg"))
for i, p in enumerate(segs):
    for b in decode_segment("j", str(p), p.read_bytes(), is_last=i == len(segs) - 1):
        n += b.num_rows
print(n)
"""

SCAN = """
import sys
from purgatory_pipeline.session import get_spark
conf = {"spark.ui.enabled": "false"}
if sys.argv[3]:
    conf["spark.driver.memory"] = sys.argv[3]
spark = get_spark(sys.argv[2], **conf)
spark.sparkContext.setLogLevel("ERROR")
rows = spark.read.format("purgatory-journal").load(sys.argv[1]).groupBy("kind").count().collect()
print(sum(r["count"] for r in rows))
"""


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class Sampler(threading.Thread):
    """Peak RSS of the driver (python + its java child) and of the Python workers."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.driver_kb = 0
        self.workers_kb = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            driver = _rss_kb(self.pid)
            workers = 0
            for child in _children(self.pid):
                driver += _rss_kb(child)
                if _comm(child) == "java":
                    stack = _children(child)
                    while stack:
                        pid = stack.pop()
                        workers += _rss_kb(pid)
                        stack.extend(_children(pid))
            self.driver_kb = max(self.driver_kb, driver)
            self.workers_kb = max(self.workers_kb, workers)
            time.sleep(0.2)


# The CLI's console line: HH:MM:SS.mmm (local time) and the step.
_STEP = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) (ingest: .*)$")


def _steps(err: str, started: float, ended: float) -> dict[str, float]:
    """Seconds from each logged step to the next (the first from the process start)."""
    marks: list[tuple[float, str]] = [(started, "start (JVM, session)")]
    for line in err.splitlines():
        match = _STEP.match(line)
        if match:
            hours, minutes, seconds, millis = (int(g) for g in match.groups()[:4])
            day = time.localtime(started)
            stamp = time.mktime((*day[:3], hours, minutes, seconds, 0, 0, -1)) + millis / 1000
            if stamp < started - 1:  # the run crossed midnight
                stamp += 86400
            marks.append((stamp, match.group(5)))
    marks.append((ended, "end"))
    steps: dict[str, float] = {}
    for (at, name), (until, _) in itertools.pairwise(marks):
        key = re.sub(r"\d+", "N", name)
        steps[key] = round(steps.get(key, 0.0) + until - at, 1)
    return steps if len(marks) > 2 else {}


def measure(label: str, args: list[str], records: int) -> dict[str, object]:
    start = time.perf_counter()
    start_wall = time.time()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        causes = [ln for ln in err.splitlines() if "Error" in ln or "Exception" in ln]
        raise SystemExit(f"{label} failed:\n" + "\n".join(causes[:20]))
    try:
        summary = json.loads(out)
        shown = f"decoded {summary['segments_decoded']} segments"
    except (ValueError, TypeError, KeyError):  # not ingest's summary: its last line
        shown = out.strip().splitlines()[-1][:80] if out.strip() else ""
    result = {
        "label": label,
        "wall_s": round(wall, 1),
        "records_per_s": round(records / wall),
        "driver_peak_mb": round(sampler.driver_kb / 1024),
        "workers_peak_mb": round(sampler.workers_kb / 1024),
        "oom_lines": err.count("OutOfMemoryError"),
        "output": shown,
        "steps": _steps(err, start_wall, time.time()),
    }
    print(result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--dir", default="/tmp/pipeline-bench")
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--driver-memory", default="", help="spark.driver.memory (default 1g)")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (ingests)"
    )
    parser.add_argument("--only", default="plain,duckdb,scan1,scan2,ingest1,ingest2,incr2")
    args = parser.parse_args()
    base = Path(args.dir)
    journal = base / "data" / "bench" / "journal"
    if not any(journal.glob("*.seg")):
        t = time.perf_counter()
        size = write_journal_sized(journal, args.records, args.segment_mb << 20)
        print(
            f"generated {args.records} records ({size / 1e6:.0f} MB) in "
            f"{time.perf_counter() - t:.0f} s",
            flush=True,
        )
    segments = sorted(journal.glob("*.seg"))
    print(
        f"journal: {len(segments)} segments, {sum(p.stat().st_size for p in segments) / 1e6:.0f} MB"
    )
    py = sys.executable
    memory = ["--conf", f"spark.driver.memory={args.driver_memory}"] if args.driver_memory else []
    for pair in args.conf:
        memory += ["--conf", pair]
    runs = {"plain": ("plain python, 1 process", [py, "-c", PLAIN, str(journal)])}
    duck = [py, "-m", "bench._pipeline_duckdb", str(journal), str(base / "tables-duckdb")]
    runs["duckdb"] = ("decoder + DuckDB tables, 1 process", duck)
    for n in (1, 2):
        scan = [py, "-c", SCAN, str(journal), f"local[{n}]", args.driver_memory]
        runs[f"scan{n}"] = (f"spark scan local[{n}]", scan)

    def ingest(n: int, *extra: str) -> list[str]:
        out = str(base / f"tables-{n}")
        return [
            py,
            "-m",
            "purgatory_pipeline",
            "--master",
            f"local[{n}]",
            "--conf",
            "spark.ui.enabled=false",
            *memory,
            "--log-level",
            "INFO",
            "--spark-log",  # Spark's console, where the OutOfMemoryError lines are counted
            "console",
            "ingest",
            "--journal",
            str(journal),
            "--out",
            out,
            *extra,
        ]

    for n in (1, 2):
        runs[f"ingest{n}"] = (f"spark ingest --full local[{n}]", ingest(n, "--full"))
    runs["incr2"] = ("spark ingest, one segment added, local[2]", ingest(2))
    results = []
    for key in args.only.split(","):
        if key.startswith("ingest"):
            shutil.rmtree(base / f"tables-{key[-1]}", ignore_errors=True)
        added = None
        if key == "incr2":
            before = set(journal.glob("*.seg"))
            append_segment(journal, args.records // len(segments))
            [added] = set(journal.glob("*.seg")) - before
        try:
            results.append(measure(*runs[key], args.records))
        finally:
            if added is not None:
                added.unlink()
    print("\n| run | wall s | records/s | driver peak RSS MB | worker peak RSS MB | OOM lines |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(
            f"| {r['label']} | {r['wall_s']} | {r['records_per_s']:,} | "
            f"{r['driver_peak_mb']} | {r['workers_peak_mb']} | {r['oom_lines']} |"
        )
    for r in results:
        if r["steps"]:
            print(f"\n{r['label']}: " + ", ".join(f"{k} {v} s" for k, v in r["steps"].items()))
    _ratios({key: r for key, r in zip(args.only.split(","), results, strict=True)})


def _ratios(by_key: dict[str, dict[str, object]]) -> None:
    """The targets' ratios, where this run measured both sides."""
    wall = {key: float(str(r["wall_s"])) for key, r in by_key.items()}
    pairs = [
        ("ingest local[2] pace / plain decoder's (target >= 1.0)", "plain", "ingest2"),
        ("ingest local[2] pace / DuckDB baseline's (target >= 1.0)", "duckdb", "ingest2"),
        ("local[1] wall / local[2] wall (target >= 1.6)", "ingest1", "ingest2"),
        ("incremental / full local[2] wall (target <= 0.20)", "incr2", "ingest2"),
    ]
    print()
    for text, top, bottom in pairs:
        if top in wall and bottom in wall:
            print(f"{text}: {wall[top] / wall[bottom]:.2f}")


if __name__ == "__main__":
    main()
