"""What prompt removal from watch lists costs the engine, next to Kafka's lazy lists.

Both modes of ``DelayedOperationPurgatory`` (``unwatch_on_complete`` True and False) run
the same seeded cycle in one process, interleaved round by round: register an operation
on ``k`` keys (one hot key shared by all, the rest its own), then complete it through its
first key, the way a signal does. Reported: ns per watch+complete cycle, the ratio of the
two modes per round, and the watch entries still listed at the end (the memory the lazy
mode keeps until a purge). Timed loops run with the GC disabled, reaper off, MockTime.

Run: ``python -m bench.watch_lists`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from functools import partial
from operator import itemgetter

from purgatory_server import DelayedOperation, DelayedOperationPurgatory, MockTime

from bench._common import markdown_table
from bench._rounds import Rounds


class Op(DelayedOperation):
    __slots__ = ("ready",)

    def __init__(self) -> None:
        super().__init__(60_000)
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        return None

    def on_expiration(self) -> None:
        return None


def cycle(prompt: bool, n: int, keys_per_op: int) -> tuple[float, int]:
    """ns per watch+complete cycle, and watch entries left listed afterwards."""
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory(
        "bench",
        reaper_enabled=False,
        time=MockTime(),
        purge_interval=1_000,
        unwatch_on_complete=prompt,
    )
    ops = [Op() for _ in range(n)]
    keys = [[f"own-{i}-{j}" for j in range(keys_per_op - 1)] + ["hot"] for i in range(n)]
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for op, ks in zip(ops, keys, strict=True):
            p.try_complete_else_watch(op, ks)
            op.ready = True
            p.check_and_complete(ks[0])
            p.advance_clock(0)  # where the lazy mode's purge runs
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    left = p.watched()
    p.shutdown()
    return elapsed / n, left


MODES = ("prompt", "lazy")  # unwatch_on_complete True, False
NS = itemgetter(0)  # a cycle's ns per watch+complete


def _cycle(mode: str, ops: int, keys_per_op: int) -> tuple[float, int]:
    """``cycle`` in the mode named ``mode``."""
    return cycle(mode == "prompt", ops, keys_per_op)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--keys", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.ops, args.rounds = 2_000, 2
    rows = []
    loads = []
    for k in args.keys:
        rounds: Rounds[tuple[float, int]] = Rounds(MODES, args.rounds, progress=False)
        rounds.run(partial(_cycle, ops=args.ops, keys_per_op=k))
        ratios = rounds.ratios("prompt", "lazy", NS)
        last = rounds.results[-1]
        rows.append(
            [
                k,
                statistics.median(rounds.values("lazy", NS)),
                statistics.median(rounds.values("prompt", NS)),
                statistics.median(ratios),
                f"{min(ratios):.2f}-{max(ratios):.2f}",
                last["lazy"][1],
                last["prompt"][1],
            ]
        )
        loads.append(f"{k} keys per op: {rounds.load_report()}")
    print(f"{args.ops:,} operations per round, {args.rounds} interleaved rounds\n")
    print(
        markdown_table(
            [
                "keys per op",
                "lazy ns/cycle",
                "prompt ns/cycle",
                "prompt / lazy (median)",
                "range",
                "entries left, lazy",
                "entries left, prompt",
            ],
            rows,
        )
    )
    print("\n".join(loads))


if __name__ == "__main__":
    main()
