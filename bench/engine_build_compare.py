"""The mypyc-compiled engine next to the pure-Python one, interleaved in one run.

One installation holds both builds (the compiled extensions next to their sources);
``PURGATORY_PURE_PYTHON=1`` makes a process load the sources. Each round runs, for each
build in turn, in a fresh child process:

- **engine cycle** (in process, MockTime, reaper off, GC off while timed): an
  operation (an interpreted ``DelayedOperation`` subclass, as the service's) is registered
  on 3 keys (its own and two shared by many) with ``try_complete_else_watch``, a third
  are then completed by a ``check_and_complete`` of their own key (a shared one would
  try every operation listed there), a third by ``force_complete``, and the rest
  expire when the clock passes their timeout (``advance_clock`` + the executor). Reported:
  ns of CPU per operation (``time.process_time_ns``: the executor thread included).
- **Kafka's workload** (``bench.purgatory_perf --no-baseline``, real clock, reaper on):
  CPU ms per 1,000 requests (all threads, harness included), achieved/target rate and
  expiry lateness p99.

The table gives per-build medians and the median of per-round ratios (pure / compiled:
above 1 means the compiled build is cheaper). Run:
``python -m bench.engine_build_compare`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path

from bench._common import markdown_table
from bench._rounds import Rounds

BUILDS = ("compiled", "pure")


def engine_cycle(n: int) -> dict[str, float]:
    """The child's in-process engine measurement (see the module docstring)."""
    from purgatory_server import DelayedOperation, DelayedOperationPurgatory, MockTime
    from purgatory_server._engine import COMPILED

    class Op(DelayedOperation):
        __slots__ = ("ready",)

        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.ready = False

        def try_complete(self) -> bool:
            return self.ready and self.force_complete()

        def on_complete(self) -> None:
            return None

        def on_expiration(self) -> None:
            return None

    clock = MockTime()
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory(
        "bench", reaper_enabled=False, time=clock
    )
    timer = p.timer
    ops = [Op(50 + i % 50) for i in range(n)]
    keys = [(f"own{i}", f"a{i % 1000}", f"b{i % 97}") for i in range(n)]
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        for op, ks in zip(ops, keys, strict=True):
            p.try_complete_else_watch(op, ks)
        for i in range(0, n, 3):
            ops[i].ready = True
            p.check_and_complete(keys[i][0])
        for i in range(1, n, 3):
            ops[i].force_complete()
        clock.sleep(200)
        while timer.advance_clock(0):
            pass
        assert timer._wait_executor_idle(60.0)  # type: ignore[attr-defined]
        elapsed = time.process_time_ns() - start
    finally:
        gc.enable()
    assert p.num_delayed() == 0 and p.watched() == 0
    p.shutdown()
    return {"compiled": float(COMPILED), "ns_per_op": elapsed / n}


def child(build: str, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PURGATORY_PURE_PYTHON", None)
    if build == "pure":
        env["PURGATORY_PURE_PYTHON"] = "1"
    code = (
        "import json, sys; from bench.engine_build_compare import engine_cycle; "
        f"print(json.dumps(engine_cycle({args.ops})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    )
    cycle = json.loads(out.stdout)
    if bool(cycle["compiled"]) != (build == "compiled"):
        raise SystemExit(f"{build} run loaded the other build: is the engine compiled?")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "perf.json")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.purgatory_perf",
                "--no-baseline",
                "--rate",
                str(args.rate),
                "--duration",
                str(args.duration),
                "--json",
                str(path),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        perf = json.loads(path.read_text())["result"]
    return {
        "engine cycle, CPU ns per operation": cycle["ns_per_op"],
        "purgatory_perf, CPU ms per 1,000 requests": perf["cpu_ms_per_1000"],
        "purgatory_perf, achieved / target": perf["achieved_rate"] / perf["target_rate"],
        "purgatory_perf, expiry lateness p99 (ms)": perf["lateness_ms"]["p99"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=100_000, help="engine cycle operations")
    parser.add_argument("--rate", type=int, default=20_000, help="purgatory_perf rate")
    parser.add_argument("--duration", type=float, default=5.0, help="purgatory_perf seconds")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.ops, args.duration = 1, 10_000, 1.0
    print(f"# {args}; load {os.getloadavg()}")
    rounds: Rounds[dict[str, float]] = Rounds(BUILDS, args.rounds, progress=False)
    for r, order in enumerate(rounds):
        for build in order:
            rounds.record(build, child(build, args))
        print(
            f"round {r + 1}: " + json.dumps({b: rounds.results[-1][b] for b in BUILDS}), flush=True
        )
    rows = []
    for metric in rounds.results[0]["compiled"]:
        key = itemgetter(metric)
        ratio = rounds.median_ratio("pure", "compiled", key)
        rows.append(
            [
                metric,
                f"{statistics.median(rounds.values('compiled', key)):,.2f}",
                f"{statistics.median(rounds.values('pure', key)):,.2f}",
                f"{ratio:.2f}" if ratio is not None else "-",
            ]
        )
    print(markdown_table(["metric (median)", "compiled", "pure", "pure / compiled"], rows))
    print(f"# load after {os.getloadavg()}")
    print(rounds.load_report())


if __name__ == "__main__":
    main()
