"""Timer scaling: the timing wheel against a heap and asyncio, at 1e3..1e6 pending tasks.

What it measures, for each N (tasks already pending) and each implementation, in one run:

- **insert+cancel**: ns for one schedule followed at once by its cancel, with N other
  tasks pending. This is the purgatory's common case: most operations complete before
  their timeout and their timer entry is withdrawn.
- **insert+fire**: ns per task for tasks with short delays (uniform 1..100 ms) that do
  fire, with the N long-delay tasks still pending. The clock is a mock one advanced 1 ms
  per step, ``--batch`` inserts per step, until everything inserted has fired.
- **bytes/pending**: tracemalloc's count of bytes allocated while pre-filling N tasks,
  divided by N: the structure *and* the per-operation objects its API makes you create.

Implementations:

- ``wheel``: :class:`purgatory_server.SystemTimer` on a :class:`MockTime`. A task is a
  minimal :class:`TimerTask` (its ``run`` bumps a counter). Firing is driven by
  ``clock.sleep(1); timer.advance_clock(0)`` and the timed span ends when the executor
  thread is idle, so the hand-off to ``executor-<name>`` is counted (it is part of the
  wheel's firing path); the work done there per task is one counter bump.
- ``heap``: ``heapq`` of ``[expiry, seq, callback]`` lists; cancel marks ``callback`` as
  None (lazy) and, like asyncio, the heap is rebuilt without cancelled entries when they
  are more than half of it.
- ``asyncio``: ``loop.call_later`` / ``TimerHandle.cancel`` on a selector event loop whose
  ``time()`` is a mock clock. Insert+cancel runs inside a coroutine that yields to the loop
  every 1,000 pairs (so the loop's own cancelled-handle clean-up runs, as it would in a
  live server); insert+fire advances the mock clock 1 ms and yields once per step, and the
  loop's ``_run_once`` runs everything due before the coroutine resumes.

Delays of pending and inserted-then-cancelled tasks are uniform over 30 s..300 s (so
nothing fires during a measurement; they live on the wheel's 4th and 5th levels). The
garbage collector is disabled (``gc.disable()``) around every timed loop and timing uses
``time.perf_counter_ns``. Each timed loop runs ``--repeats`` times; the table shows the
median. This is a benchmark, not a test: numbers on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench._common import markdown_table, run_context, write_json
from bench._timer_impls import FIRE_DELAY_MS, HORIZON_MS, AsyncioImpl, HeapImpl, Impl, WheelImpl

IMPLS: dict[str, Callable[[], Impl]] = {
    "wheel": WheelImpl,
    "heap": HeapImpl,
    "asyncio": AsyncioImpl,
}


def measure(
    impl_name: str, n: int, *, m: int, batch: int, repeats: int, seed: int
) -> dict[str, Any]:
    """Pre-fill ``n``, then time ``m`` insert+cancel pairs and ``m`` insert+fire tasks."""
    rng = random.Random(seed)
    prefill = [rng.randint(*HORIZON_MS) for _ in range(n)]
    cancel_delays = [rng.randint(*HORIZON_MS) for _ in range(m)]
    fire_delays = [rng.randint(*FIRE_DELAY_MS) for _ in range(m)]
    impl = IMPLS[impl_name]()
    try:
        gc.collect()
        gc.disable()
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        impl.prefill(prefill)
        after, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        gc.enable()
        del prefill
        ic = [impl.insert_cancel(cancel_delays) / m for _ in range(repeats)]
        ifire = [impl.insert_fire(fire_delays, batch) / m for _ in range(repeats)]
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        gc.enable()
        impl.close()
    return {
        "impl": impl_name,
        "n": n,
        "bytes_per_pending": (after - base) / n,
        "insert_cancel_ns": statistics.median(ic),
        "insert_cancel_ns_runs": ic,
        "insert_fire_ns": statistics.median(ifire),
        "insert_fire_ns_runs": ifire,
    }


def _tables(results: list[dict[str, Any]], impls: list[str]) -> str:
    by = {(r["impl"], r["n"]): r for r in results}
    ns = sorted({r["n"] for r in results})
    base_n = ns[0]
    out = []
    for metric, title in (
        ("insert_cancel_ns", "insert+cancel, ns/op (median)"),
        ("insert_fire_ns", "insert+fire, ns/op (median)"),
        ("bytes_per_pending", "bytes per pending task (tracemalloc)"),
    ):
        headers = ["N pending", *impls]
        if metric != "bytes_per_pending":
            headers += [f"{i} / {i}@N={base_n:,}" for i in impls]
            headers += [f"wheel / {i}" for i in impls if i != "wheel" and "wheel" in impls]
        rows: list[list[object]] = []
        for n in ns:
            vals = [by[(i, n)][metric] for i in impls]
            row: list[object] = [f"{n:,}", *vals]
            if metric != "bytes_per_pending":
                row += [by[(i, n)][metric] / by[(i, base_n)][metric] for i in impls]
                if "wheel" in impls:
                    w = by[("wheel", n)][metric]
                    row += [w / by[(i, n)][metric] for i in impls if i != "wheel"]
            rows.append(row)
        out.append(f"### {title}\n\n{markdown_table(headers, rows)}")
    return "\n\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.timer_scaling", description=__doc__)
    p.add_argument("--sizes", default="1000,10000,100000,1000000", help="pending N values")
    p.add_argument("--ops", type=int, default=100_000, help="M: timed operations per loop")
    p.add_argument("--batch", type=int, default=100, help="insert+fire: inserts per 1 ms step")
    p.add_argument("--repeats", type=int, default=3, help="timed loops per cell (median shown)")
    p.add_argument("--impls", default="wheel,heap,asyncio")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--quick", action="store_true", help="smoke run: N<=1e4, 20k ops, 1 repeat")
    p.add_argument("--json", nargs="?", const="", default=None, help="write JSON (path optional)")
    p.add_argument(
        "--watchdog-s", type=float, default=1800.0, help="dump all stacks and exit if exceeded"
    )
    args = p.parse_args(argv)
    # A benchmark that hangs (a livelock in the code under test, say) should say where and
    # stop, not occupy a shared machine until someone notices.
    faulthandler.dump_traceback_later(args.watchdog_s, exit=True)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    if args.quick:
        sizes = [s for s in sizes if s <= 10_000] or [1_000]
        args.ops, args.repeats = 20_000, 1
    impls = [i.strip() for i in args.impls.split(",")]
    unknown = set(impls) - set(IMPLS)
    if unknown:
        p.error(f"unknown implementations: {sorted(unknown)}")

    ctx = run_context()
    print(f"# timer scaling: M={args.ops:,} ops per loop, {args.repeats} repeat(s), median shown")
    print(f"# {ctx}")
    results: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    for n in sizes:
        for name in impls:  # side by side: every implementation at this N before the next N
            r = measure(name, n, m=args.ops, batch=args.batch, repeats=args.repeats, seed=args.seed)
            results.append(r)
            print(
                f"#   N={n:>9,} {name:>8}: insert+cancel {r['insert_cancel_ns']:8.0f} ns, "
                f"insert+fire {r['insert_fire_ns']:8.0f} ns, {r['bytes_per_pending']:6.0f} B",
                flush=True,
            )
    print(f"# total {time.perf_counter() - t_start:.1f} s\n")
    print(_tables(results, impls))
    if "wheel" in impls and len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        by = {(r["impl"], r["n"]): r for r in results}
        ratio = by[("wheel", hi)]["insert_cancel_ns"] / by[("wheel", lo)]["insert_cancel_ns"]
        verdict = "PASS" if ratio <= 2.0 else "FAIL"
        print(
            f"\nacceptance: wheel insert+cancel at N={hi:,} / at N={lo:,} = {ratio:.2f} "
            f"(<= 2.0): {verdict}"
        )
    if args.json is not None:
        payload = {"context": ctx, "args": vars(args), "results": results}
        path = write_json("timer_scaling", payload, args.json or None)
        print(f"\n# JSON written to {path}")
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
