"""Where the server's CPU goes, per pair: py-spy profiles broken down by category.

Three profiles, each of a real process sampled from outside by py-spy (``record --native
--full-filenames --format raw``: every Python thread that is on a CPU, with native frames
so protobuf's C code and grpc core show as themselves):

- **server**: a ``python -m purgatory_server`` subprocess under the service benchmark's
  batch form (``BatchTryCompleteElseWatch(wait)`` of B + ``BatchCheckAndComplete``) and
  stream form (Session frames of B watches, then B signals), load generated in this
  process exactly as ``bench.service_bench`` does. Per form: pairs/s while sampled, the
  server's CPU per pair from ``/proc/<pid>/stat`` (all threads, grpc core's C threads
  included), and the sampled time per pair in each category;
- **engine**: ``bench.purgatory_perf`` (Kafka's workload, in one process) per request;
- **recovery**: a server starting on a data directory of N pending durable operations
  (written with the journal library, as ``bench.durable_bench`` does), sampled from spawn
  to serving; per pending operation.

Categories (``bench._profile_categories``) go by the frame nearest the leaf that names
one: the engine, conditions, the operation's hooks, outcome/event building, waiters,
subscriptions, request/response conversion, validation, the journal, protobuf's C code,
grpc's transport, the event loop, the garbage collector. Sampling is at ``--rate`` Hz;
a sample of a thread on a CPU stands for 1/rate s of that thread's CPU, so the sampled
per-pair times are estimates whose sum is compared with the measured total.

    python -m bench.profile_server [--duration 6] [--rate 200] [--forms batch,stream]
                                   [--engine-rate 20000] [--recovery 200000]
                                   [--skip-engine] [--skip-recovery] [--json out.json]

py-spy must be installed (the dev extra has it) and allowed to ptrace (root, or
``kernel.yama.ptrace_scope=0``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench._common import bench_server, markdown_table, run_context, write_json
from bench._profile_categories import (
    ENGINE_RULES,
    RECOVERY_RULES,
    SERVER_RULES,
    Rule,
    classify,
    parse_raw,
)
from harness import PURGATORY_SERVER, ServerProcess


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy not found: pip install py-spy (it is in the dev extra)")
    return found


def spy_cmd(out: Path, rate: int) -> list[str]:
    # --gil: only the thread holding the GIL, i.e. Python work, not threads parked on
    # a lock or in epoll (py-spy's idle detection misses those once --native is on).
    flags = ["--native", "--gil", "--full-filenames", "--format", "raw"]
    return [py_spy(), "record", *flags, "--rate", str(rate), "--output", str(out)]


def breakdown(
    raw: Path, rules: list[Rule], rate: int, units: float
) -> tuple[list[tuple[str, float, float]], float, Counter[str]]:
    """Per category (name, µs per unit, share of samples); sampled µs per unit; unknowns."""
    with raw.open() as fh:
        per_category, unknown = classify(parse_raw(fh), rules)
    total = sum(per_category.values()) or 1
    rows = [
        (name, n / rate / units * 1e6, n / total)
        for name, n in sorted(per_category.items(), key=lambda kv: -kv[1])
    ]
    return rows, total / rate / units * 1e6, unknown


def table(rows: list[tuple[str, float, float]], unit: str) -> str:
    return markdown_table(
        ["category", f"µs per {unit}", "share"],
        [[name, us, f"{share:.1%}"] for name, us, share in rows],
    )


# ----------------------------------------------------------------------- the server
async def _server_form(form: str, a: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    from bench._service_stream import grpc_stream
    from bench._service_unary import grpc_batched

    target, pid = server.address, server.pid

    drive = {"batch": grpc_batched, "stream": grpc_stream}[form]
    shape = argparse.Namespace(
        duration=a.duration,
        warmup=a.warmup,
        channels=2,
        batch_size=a.batch_size,
        batch_workers=a.batch_workers,
        streams=a.streams,
    )
    # Warm up unobserved, then sample a second run of the same length.
    warm_up = argparse.Namespace(**{**vars(shape), "duration": a.warmup})
    await drive(f"{form} warm-up", target, warm_up)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "spy.txt"
        spy = subprocess.Popen(
            [*spy_cmd(raw, a.rate), "--pid", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)  # py-spy attaches
        cpu0 = server.cpu_seconds()
        run = await drive(form, target, argparse.Namespace(**{**vars(shape), "warmup": 0.0}))
        cpu = server.cpu_seconds() - cpu0
        spy.send_signal(signal.SIGINT)
        _, err = spy.communicate(timeout=60)
        if not raw.exists():
            raise SystemExit(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")
        # Samples cover a little more than the run (attach and stop): scale to the run.
        rows, sampled, unknown = breakdown(raw, SERVER_RULES, a.rate, run.pairs)
    window = run.seconds + 1.0
    scale = run.seconds / window
    rows = [(name, us * scale, share) for name, us, share in rows]
    return {
        "form": form,
        "pairs": run.pairs,
        "pairs_per_s": run.rate,
        "server_cpu_us_per_pair": cpu / run.pairs * 1e6,
        "sampled_us_per_pair": sampled * scale,
        "categories": rows,
        "unknown_leaves": unknown.most_common(8),
    }


def profile_server(a: argparse.Namespace) -> list[dict[str, Any]]:
    with (
        tempfile.TemporaryDirectory(prefix="profile-server-") as tmp,
        bench_server(Path(tmp), "purgatory") as server,
    ):
        return [asyncio.run(_server_form(form, a, server)) for form in a.forms.split(",") if form]


# ----------------------------------------------------------------------- the engine
def profile_engine(a: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "spy.txt"
        report = Path(tmp) / "perf.json"
        cmd = [
            *spy_cmd(raw, a.rate),
            "--",
            sys.executable,
            "-m",
            "bench.purgatory_perf",
            "--rate",
            str(a.engine_rate),
            "--duration",
            str(a.duration),
            "--drain-s",
            "1",
            "--no-baseline",
            "--json",
            str(report),
        ]
        started = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        result = json.loads(report.read_text())
        engine = result["result"]
        requests = engine["requests"]
        rows, sampled, unknown = breakdown(raw, ENGINE_RULES, a.rate, requests)
    return {
        "requests": requests,
        "achieved_per_s": engine["achieved_rate"],
        "cpu_us_per_request": engine["cpu_ms_per_1000"],  # ms/1000 = µs/1
        "lateness_p99_ms": engine["lateness_ms"]["p99"],
        "wall_s": wall,
        "sampled_us_per_request": sampled,
        "categories": rows,
        "unknown_leaves": unknown.most_common(8),
    }


# ----------------------------------------------------------------------- recovery
def profile_recovery(a: argparse.Namespace) -> dict[str, Any]:
    from bench.durable_bench import write_pending

    n = a.recovery
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        write_pending(data, n)
        raw = Path(tmp) / "spy.txt"
        # The server runs as py-spy's child, under the harness (its port file, its log).
        server = ServerProcess(
            Path(tmp),
            ["--data-dir", str(data), "--log-level", "WARNING"],
            label="recovering",
            command=[*spy_cmd(raw, a.rate), "--", *PURGATORY_SERVER],
            env={"PURGATORY_DEFAULTS_MAX_PENDING": str(max(2 * n, 1_000_000))},
            start_timeout_s=600,
        )
        server.start()
        try:
            server.wait_port()
            serving = server.ready_s
        finally:
            # Stop the server (py-spy's child); py-spy then writes its output and exits.
            spy = server.pid
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                for child in Path(f"/proc/{spy}/task/{spy}/children").read_text().split():
                    os.kill(int(child), signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(120)
            server.stop()
        rows, sampled, unknown = breakdown(raw, RECOVERY_RULES, a.rate, n)
    return {
        "pending": n,
        "spawn_to_serving_s": serving,
        "sampled_us_per_op": sampled,
        "categories": rows,
        "unknown_leaves": unknown.most_common(8),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=6.0, help="seconds sampled per profile")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    p.add_argument("--warmup", type=float, default=1.0, help="unsampled load before each form")
    p.add_argument("--forms", default="batch,stream", help="server forms to profile")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--batch-workers", type=int, default=4)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--engine-rate", type=float, default=20_000.0)
    p.add_argument("--recovery", type=int, default=200_000, help="pending operations")
    p.add_argument("--skip-engine", action="store_true")
    p.add_argument("--skip-recovery", action="store_true")
    p.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = p.parse_args()
    context = run_context()
    print(f"profile: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    out: dict[str, Any] = {"context": context, "args": vars(a)}
    if a.forms:
        out["server"] = profile_server(a)
        for form in out["server"]:
            print(
                f"\n### server, {form['form']} form: {form['pairs_per_s']:,.0f} pairs/s while "
                f"sampled; server CPU {form['server_cpu_us_per_pair']:.1f} µs/pair "
                f"(all threads), sampled {form['sampled_us_per_pair']:.1f} µs/pair\n"
            )
            print(table(form["categories"], "pair"))
            print(f"\nunrecognised leaves: {form['unknown_leaves']}")
    if not a.skip_engine:
        out["engine"] = eng = profile_engine(a)
        print(
            f"\n### engine (bench.purgatory_perf at {a.engine_rate:,.0f}/s): "
            f"{eng['requests']:,} requests, CPU {eng['cpu_us_per_request']:.1f} µs/request "
            f"(harness included), sampled {eng['sampled_us_per_request']:.1f} µs/request\n"
        )
        print(table(eng["categories"], "request"))
        print(f"\nunrecognised leaves: {eng['unknown_leaves']}")
    if not a.skip_recovery:
        out["recovery"] = rec = profile_recovery(a)
        print(
            f"\n### recovery of {rec['pending']:,} pending operations: spawn to serving "
            f"{rec['spawn_to_serving_s']:.2f} s under py-spy, sampled "
            f"{rec['sampled_us_per_op']:.1f} µs/operation\n"
        )
        print(table(rec["categories"], "operation"))
        print(f"\nunrecognised leaves: {rec['unknown_leaves']}")
    print(f"\nraw numbers: {write_json('profile_server', out, a.json)}")


if __name__ == "__main__":
    main()
