"""The engine's CPU per request in one thread, this tree vs another source tree.

One request is what ``bench.purgatory_perf`` does per request, without its clock, pacing
or threads: create an interpreted ``DelayedOperation`` subclass, ``try_complete_else_watch``
it on 3 keys out of 100 (its condition is not met, so it is watched and armed in a
``SystemTimer``; reaper off), and ``force_complete`` the one registered ``--pending``
requests earlier (cancel its timer entry, leave its keys, ``on_complete``), so about as
many operations wait as in ``purgatory_perf`` at 50,000/s (5,000: 100 ms of arrivals).
The figure is ``time.thread_time_ns`` per request over ``--requests`` requests, the best
of ``--repeats`` (GC frozen for the inputs, not off).

With ``--compare-src DIR`` each measurement runs in a fresh child process whose
``PYTHONPATH`` selects the tree (compile that tree first: ``python setup.py build_ext
--inplace`` in it, or it runs its pure-Python engine); the trees alternate within every
round, order flipped each round, so both see the same machine load. The report gives each
round's figures, the median ratio (baseline / this tree: above 1 means this tree is
cheaper) and each tree's median and best. One process's figure varies by up to a half
from the next one's on this machine (memory layout: it is stable within a process), so
use several rounds::

    python -m bench.engine_cpu --compare-src /tmp/base [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import deque

from bench._common import markdown_table, tree_pythonpath
from bench._rounds import Rounds


def measure(
    requests: int, repeats: int, keys: int, key_space: int, pending: int
) -> tuple[float, bool]:
    """Best-of-``repeats`` thread CPU ns per request in this process's engine."""
    import purgatory_server._engine as engine
    from purgatory_server import (
        DelayedOperation,
        DelayedOperationPurgatory,
        SystemTimer,
    )

    class Op(DelayedOperation):
        __slots__ = ("done",)

        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.done = 0

        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            self.done += 1

        def on_expiration(self) -> None:
            pass

    rng = random.Random(7)
    space = range(key_space)
    inputs = [tuple(rng.sample(space, keys)) for _ in range(requests)]
    gc.collect()
    gc.freeze()
    best = None
    for _ in range(repeats):
        purgatory: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory(
            "cpu", timer=SystemTimer("cpu"), reaper_enabled=False
        )
        watch = purgatory.try_complete_else_watch
        window: deque[Op] = deque()
        t0 = time.thread_time_ns()
        for k in inputs:
            op = Op(100_000)
            watch(op, k)
            window.append(op)
            if len(window) > pending:
                window.popleft().force_complete()
        while window:
            window.popleft().force_complete()
        ns = (time.thread_time_ns() - t0) / requests
        assert purgatory.watched() == 0 and purgatory.num_delayed() == 0
        purgatory.shutdown()
        best = ns if best is None else min(best, ns)
    assert best is not None
    return best, bool(getattr(engine, "COMPILED", False))


def compare(args: argparse.Namespace) -> int:
    trees = {"this tree": dict(os.environ)}
    trees[args.compare_label] = {**os.environ, "PYTHONPATH": tree_pythonpath(args.compare_src)}
    child = [sys.executable, "-m", "bench.engine_cpu", "--child"]
    child += ["--requests", str(args.requests), "--repeats", str(args.repeats)]
    child += ["--pending", str(args.pending)]

    def child_ns(name: str) -> float:
        out = subprocess.run(
            child, env=trees[name], check=True, capture_output=True, text=True
        ).stdout
        return float(json.loads(out)["ns_per_request"])

    rounds = Rounds[float](list(trees), args.rounds).run(child_ns)
    this_us = [ns / 1000 for ns in rounds.values("this tree", float)]
    base_us = [ns / 1000 for ns in rounds.values(args.compare_label, float)]
    ratios = rounds.ratios(args.compare_label, "this tree", float)
    rows: list[list[object]] = [
        [rnd + 1, base, this, base / this]
        for rnd, (base, this) in enumerate(zip(base_us, this_us, strict=True))
    ]
    print(
        f"# {args.requests} requests x best of {args.repeats}, {args.rounds} rounds, "
        f"load {os.getloadavg()}\n"
    )
    headers = ["round", f"{args.compare_label} (us/request)", "this tree (us/request)"]
    print(markdown_table([*headers, "ratio"], rows))
    print(f"\nmedian ratio {args.compare_label} / this tree: {statistics.median(ratios):.2f}")
    print(
        f"per tree, median / best (us/request): {args.compare_label} "
        f"{statistics.median(base_us):.2f} / {min(base_us):.2f}, this tree "
        f"{statistics.median(this_us):.2f} / {min(this_us):.2f}"
    )
    print(rounds.load_report())
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.engine_cpu", description=__doc__)
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--keys", type=int, default=3)
    p.add_argument("--key-space-size", type=int, default=100)
    p.add_argument("--pending", type=int, default=5_000, help="operations left waiting")
    p.add_argument("--compare-src", help="another source tree (e.g. git archive main)")
    p.add_argument("--compare-label", default="baseline")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.compare_src:
        return compare(args)
    ns, compiled = measure(
        args.requests, args.repeats, args.keys, args.key_space_size, args.pending
    )
    if args.child:
        print(json.dumps({"ns_per_request": ns, "compiled": compiled}))
    else:
        print(f"{ns / 1000:.2f} us per request (compiled={compiled})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
