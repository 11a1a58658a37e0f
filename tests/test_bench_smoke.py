"""Every benchmark entry point runs, with tiny arguments, so that none rots.

Benchmarks are not tests (bench/README.md): nothing here checks a number. Each case runs
``python -m bench.<module>`` as a person would, from the repository root, with arguments
small enough for the whole file to take well under a minute, and checks that it exits 0
and printed its report (a line only its report has); raw numbers go to a temporary
directory, not bench/results/. Every module with a command line also answers ``--help``.

Parts that need a tool run when it is there and say so when it is not, never a silent
pass: a skip with the reason for NATS (``nats-server`` from the ``cluster`` extra),
Node.js (``node`` and client/node's packages, which ``make test`` installs before the
Python tests; the client is built here, a fraction of a second), BullMQ for
``bullmq_bench`` (``npm ci --prefix bench/node``, which ``make unit`` runs, and
``redis-server``), py-spy (the ``dev``
extra, allowed to attach: root or ptrace_scope 0) and the compiled engine; a warning in
pytest's summary for Redis (service_bench runs without its Redis baselines; ``make test``
installs the Debian package redis-server).

The Spark pipeline's benchmarks (bench/pipeline_bench.py, pipeline_journal.py, pipeline_watch.py,
and _pipeline_duckdb.py, pipeline_bench's DuckDB baseline) are not run here: tests/pipeline
covers the pipeline.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import purgatory_server._engine as engine
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
NODE_DIR = ROOT / "client" / "node"
PIPELINE = {"pipeline_bench", "pipeline_journal", "pipeline_watch", "_pipeline_duckdb"}


def _missing_node() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_DIR / "node_modules").is_dir():
        return "client/node has no node_modules (make node-deps)"
    return None


def _missing_bullmq() -> str | None:
    missing = _missing_node()
    if missing is not None:
        return missing
    if not (BENCH / "node" / "node_modules" / "bullmq").is_dir():
        return "bench/node has no node_modules (npm ci --prefix bench/node)"
    if shutil.which("redis-server") is None:
        return "redis-server is not on PATH"
    return None


def _missing_nats() -> str | None:
    if importlib.util.find_spec("nats") is None:
        return "the cluster extra (nats-py, nats-server) is not installed"
    return None


def _missing_py_spy() -> str | None:
    if shutil.which("py-spy") is None and not Path(sys.executable).with_name("py-spy").exists():
        return "py-spy is not installed (the dev extra)"
    # py-spy attaches to a server that is not its child: root, or Yama's ptrace_scope 0.
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    level = scope.read_text().strip() if scope.exists() else "0"
    if os.geteuid() != 0 and level != "0":
        return f"py-spy may not attach to another process (ptrace_scope {level}, not root)"
    return None


def _interpreted_engine() -> str | None:
    return None if engine.COMPILED else "the engine is not compiled (no C compiler)"


@dataclass(frozen=True)
class Case:
    module: str
    args: str  # {tmp}: the test's temporary directory; {root}: the repository
    markers: tuple[str, ...]  # lines of its report (regular expressions)
    missing: Callable[[], str | None] = lambda: None
    name: str = ""  # the test id, if not the module's name


# --compare-src {root}: the "other" tree is this one, which exercises the comparison path.
CASES = [
    Case(
        "timer_scaling",
        "--sizes 1000,2000 --ops 2000 --repeats 1 --json {tmp}/t.json",
        (r"acceptance: wheel insert\+cancel",),
    ),
    Case(
        "purgatory_perf",
        "--rate 2000 --duration 0.3 --drain-s 0.2 --json {tmp}/p.json",
        ("acceptance: achieved/target",),
    ),
    Case("watch_lists", "--quick", ("prompt / lazy",)),
    Case(
        "cel_bench",
        "--quick --rounds 1 --seconds 0.2 --clients 1 --batch 5 --match-sizes 10,50",
        ("throughput cost", "operations tried per signal", r"\| compile"),
    ),
    Case(
        "abuse_bench",
        "--duration 0.3 --streams 1 --subscribers 3 --signal-ops 10 --key-ops 50"
        " --purgatories 1 --connections 5 --bulk-batch 20 --json {tmp}/abuse.json"
        " --server-src {root}",
        ("abuse patterns, probe pair every 20 ms", r"\| 8 bulk \|", "server from "),
    ),
    Case(
        "batch_shapes_bench",
        "--rounds 1 --batches 2 --compare-src {root} --json {tmp}/shapes.json",
        (r"\| keys \| this tree \|", r"\| payloads \| compared tree \|"),
    ),
    Case("listing_bench", "--quick --rounds 1", (r"first page \(100\) in ms",)),
    Case(
        "many_purgatories_bench",
        "--memory 20 --durable 5 --duration 0.5 --quiet 0.2 --json {tmp}/many.json",
        ("RSS per idle in-memory purgatory",),
    ),
    Case("placement_sim", "--quick", (r"\| rendezvous \|",)),
    Case(
        "memory_budget_bench",
        "--quick --compare-src {root} --fanout 3 --fanout-outcomes 50",
        (r"\| 5 retained outcomes \|", r"\| this tree \| 3 \| 50 \|"),
    ),
    Case(
        "engine_build_compare",
        "--rounds 1 --ops 1000 --rate 2000 --duration 0.3",
        ("pure / compiled",),
        _interpreted_engine,
    ),
    Case(
        "journal_bench",
        "--units 50 --appenders threads:1,tasks:2 --recovery 1000 --repeats 1 --dir {tmp}",
        ("appends/fsync",),
    ),
    Case("engine_cpu", "--requests 1000 --repeats 1 --pending 100", ("us per request",)),
    Case(
        "engine_cpu",
        "--requests 1000 --repeats 1 --pending 100 --rounds 1 --compare-src {root}",
        ("per tree, median / best",),
        name="engine_cpu-compare",
    ),
    Case(
        "core_compare",
        "--compare-src {root} --rounds 1 --pairs 50 --repeats 1 --json {tmp}/c.json",
        ("ratio = baseline CPU",),
    ),
    Case("recovery_phases", "--pending 1000 --keys 10", ("RSS growth per operation",)),
    Case(
        "durable_bench",
        "--duration 0.2 --warmup 0.05 --rounds 1 --workers 2 --batch 5 --recovery 200"
        " --json {tmp}/d.json",
        ("ratio to in-memory", r"recovery \(s\)"),
    ),
    Case(
        "recovery_bench",
        "--pending 300 --live 200 --keys 10 --json {tmp}/r.json",
        ("RSS per recovered op", "RSS per live op"),
    ),
    Case(
        "dispatcher_bench",
        "--duration 0.2 --warmup 0.05 --rounds 1 --concurrency 2 --window 50 --json {tmp}/di.json",
        (r"signals/s \(median\)",),
    ),
    Case(
        "observability_bench",
        "--duration 0.2 --warmup 0.05 --rounds 1 --concurrency 2 --batch-workers 1"
        " --batch-size 5 --scrape-interval 0.1 --inprocess-pairs 20 --repeats 1"
        " --json {tmp}/o.json",
        ("pairs/s ratio to off", "scrapes during the run: [1-9]", "the servicer's own path"),
    ),
    Case(
        "lateness_bench",
        "--rounds 1 --duration 0.3 --in-flight 2 --timeout-ms 50 --load-warmup 0.2"
        " --settle 0 --bare --json {tmp}/l.json",
        ("acceptance: this tree / loaded", r"bare grpc.aio, asyncio timer \| idle"),
    ),
    Case(
        "service_bench",
        "--duration 0.2 --warmup 0.05 --rounds 1 --concurrency 2 --batch-workers 1"
        " --batch-size 5 --streams 1 --burst 20 --json {tmp}/s.json",
        ("purgatory, stream form", "burst of 20 long-polls, CANCELLED calls"),
    ),
    Case(
        "console_bench",
        "--rounds 1 --duration 0.3 --warmup 0.05 --batch-workers 1 --batch-size 5"
        " --poll-interval 0.05 --json {tmp}/cb.json",
        ("pairs/s to elsewhere", r"\| elsewhere \|", r"\| every page \|", "acceptance: page p99"),
    ),
    Case(
        "workers_bench",
        "--rounds 1 --duration 0.3 --warmup 0.05 --load-procs 1 --streams 2 --batch-size 5"
        " --purgatories 2 --batch-workers 1 --json {tmp}/w.json",
        (r"\| 1 worker\(s\) \|", r"\| 2 worker\(s\) \|", "purgatories: part-"),
    ),
    Case(
        "node_client_bench",
        "--rounds 1 --duration 0.2 --warmup 0.05 --concurrency 2 --wm-ops 200 --window 100"
        " --json {tmp}/n.json",
        (
            "Node/Python pairs/s",
            r"watchMany, 200 ops \| Node\.js",
            r"dispatcher, window 100 \| Node\.js",
            "Node/Python watchMany ops/s",
            "Node/Python dispatcher ops/s",
        ),
        _missing_node,
    ),
    Case(
        "bullmq_bench",
        "--rounds 1 --jobs 200 --spread-ms 100 --paced-jobs 100 --paced-spread-ms 200"
        " --lead-ms 1500 --workers 2 --concurrency 4 --json {tmp}/b.json",
        (r"\| burst \| purgatory \|", r"\| paced \| bullmq \|", "purgatory/bullmq acked/s"),
        _missing_bullmq,
    ),
    Case(
        "scale_out_bench",
        "--seconds 0.2 --warmup 0.05 --rounds 1 --clients 2 --batch 5 --kills 1 --lease-ms 1500"
        " --failovers 1 --failover-kinds kill --dir {tmp}",
        (
            "replicated / local-journal",
            "takeover p50 .* 0 lost",
            "failover kill: client-visible unavailability p50 .* hung calls 0",
        ),
        _missing_nats,
    ),
    Case(
        "profile_server",
        "--duration 0.3 --rate 50 --warmup 0.1 --forms batch --batch-size 5"
        " --batch-workers 1 --engine-rate 2000 --recovery 300 --json {tmp}/pr.json",
        ("### server, batch form", "### engine", "### recovery of 300"),
        _missing_py_spy,
    ),
]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}


def _bench(module: str, *args: str, timeout_s: float = 360) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


# A smoke run is seconds on a quiet machine; on a loaded 2-core one the bench's own servers
# (a cluster of three nats-servers and four purgatory servers, for scale_out_bench) can
# take minutes to start. The run's own limit (_bench) decides, not pytest's default.
@pytest.mark.timeout(420)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name or case.module)
def test_entry_point_runs_and_reports(case: Case, tmp_path: Path) -> None:
    reason = case.missing()
    if reason is not None:
        pytest.skip(f"bench.{case.module} not run: {reason}")
    if case.module in {"node_client_bench", "bullmq_bench"}:
        # The current client: building it takes a fraction of a second (tsc).
        subprocess.run(["npm", "run", "--silent", "build"], cwd=NODE_DIR, check=True, timeout=120)
    args = shlex.split(case.args.format(tmp=tmp_path, root=ROOT))
    done = _bench(case.module, *args)
    assert done.returncode == 0, f"exited {done.returncode}:\n{done.stderr[-4000:]}"
    for marker in case.markers:
        assert re.search(marker, done.stdout), f"no {marker!r} in:\n{done.stdout[-4000:]}"
    if case.module == "service_bench":
        _check_redis_part(done)


def _check_redis_part(done: subprocess.CompletedProcess[str]) -> None:
    """The Redis baselines ran if redis-server is on PATH; if not, the run said so, and
    so does this test (a warning in pytest's summary)."""
    if shutil.which("redis-server") is not None:
        assert "redis BLPOP/LPUSH, batch form" in done.stdout, done.stdout[-4000:]
        return
    assert "Redis baselines skipped: no redis-server on PATH" in done.stderr, done.stderr
    warnings.warn(
        "redis-server is not on PATH: bench.service_bench ran without its Redis baselines",
        stacklevel=1,
    )


def _entry_points(*, pipeline: bool = False) -> list[str]:
    """Every bench module a person can run (it has a ``__main__`` block); the pipeline's
    two only with ``pipeline`` (they answer ``--help`` but are not run here)."""
    return sorted(
        p.stem
        for p in BENCH.glob("*.py")
        if 'if __name__ == "__main__":' in p.read_text() and (pipeline or p.stem not in PIPELINE)
    )


def test_every_entry_point_is_smoke_tested() -> None:
    # The two servers the benchmarks start run inside service_bench and lateness_bench.
    helpers = {"service_bare", "_lateness_server"}
    assert set(_entry_points()) - helpers == {case.module for case in CASES}


# Runs each module as ``python -m`` does (runpy, as __main__) with ``--help``, all in one
# child process, so the imports are paid once; prints "module exit-status" lines.
HELP_CHILD = """
import contextlib, io, runpy, sys
for module in sys.argv[1:]:
    sys.argv = [module, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = "no-exit"
    except SystemExit as exc:
        code = exc.code or 0
    except BaseException as exc:
        code = repr(exc)
    print(module, code if code or "usage:" in out.getvalue() else "no-usage")
"""


def test_every_entry_point_answers_help() -> None:
    modules = [f"bench.{m}" for m in _entry_points(pipeline=True)]
    done = subprocess.run(
        [sys.executable, "-c", HELP_CHILD, *modules],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    answers = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert answers == dict.fromkeys(modules, "0"), done.stdout


def test_profile_categories_name_modules_that_exist() -> None:
    """py-spy samples are attributed by path (bench/_profile_categories.py): a rule naming
    a module that moved would leave its samples to a catch-all, silently."""
    from bench._profile_categories import ENGINE_RULES, RECOVERY_RULES, SERVER_RULES

    package = ROOT / "server" / "purgatory_server"
    for fragment, _ in [*SERVER_RULES, *ENGINE_RULES, *RECOVERY_RULES]:
        if fragment.startswith(("/_service/", "/_engine/", "/_journal/")):
            assert (package / fragment.strip("/")).exists(), fragment


def test_a_round_that_counted_nothing_is_reported_not_divided_by(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A smoke run's 0.3 s window on a loaded machine can count no pair at all.
    import argparse

    from bench import workers_bench

    rates = {"1 worker(s)": [0.0], "2 worker(s)": [120.0], workers_bench.REDIS: [0.0]}
    args = argparse.Namespace(load_procs=1, streams=2, batch_size=5)
    workers_bench.report({"names": ["p"], "rates": rates, "p50_ms": {}}, args)
    rows = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| 1 ") or line.startswith("| 2 ")
    ]
    assert len(rows) == 2 and all(row.count("| - ") == 2 for row in rows), rows
