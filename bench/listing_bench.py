"""ListOperations: what its id index costs registrations, and what a page costs.

1. **Index upkeep**: the same seeded register-then-cancel cycle on a NamedPurgatory that
   was never listed (no index: the default until the first ListOperations) and on one
   listed once before the loop (its :class:`~purgatory_server._service.core.sorted_ids.
   SortedIds` index is then kept up to date), interleaved round by round in one process
   (MockTime, reaper off, GC off in the timed loops). Ids are sequential or random.
2. **Page cost vs pending**: one ListOperations page (index walk + filter + protobuf
   statuses) at growing numbers of pending operations: with no filter, an id prefix, a
   key, and a due-time range that matches nothing (the examination budget bounds it).

Run: ``python -m bench.listing_bench`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import time
from collections.abc import Callable

from purgatory_server import MockTime
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core import listing
from purgatory_server._service.core.named_purgatory import NamedPurgatory, OperationRequest
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.wire.convert import operation_status_with_progress

from bench._common import markdown_table


def _purgatory(loop: asyncio.AbstractEventLoop, max_pending: int) -> NamedPurgatory:
    settings = PurgatorySettings(name="bench", max_pending=max_pending)
    limits = Limits(max_total_pending=max_pending * 2)
    return NamedPurgatory(settings, limits, loop, time=MockTime(), reaper_enabled=False)


def _requests(ids: list[str], keys: int = 1) -> list[OperationRequest]:
    spec = ConditionSpec()
    return [
        OperationRequest(i, OperationDefinition((f"k{n % keys}",), 600_000, spec, b""))
        for n, i in enumerate(ids)
    ]


def cycle(loop: asyncio.AbstractEventLoop, listed: bool, ids: list[str]) -> float:
    """ns per register + cancel (registered in batches of 100, then cancelled)."""
    p = _purgatory(loop, len(ids) + 10)
    if listed:
        p.operations_view()  # builds the index, kept from then on
    reqs = _requests(ids)
    fields = [""] * 100
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for b in range(0, len(reqs), 100):
            p.register(reqs[b : b + 100], fields)
        p.cancel([r.operation_id for r in reqs])
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    p.shutdown_engine()
    return elapsed / len(ids)


def page_ms(p: NamedPurgatory, **filter_: object) -> float:
    """Median ms for the first page (size 100) of this filter, over 5 tries."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        query = listing.make_query(
            "bench",
            key=str(filter_.get("key", "")),
            prefix=str(filter_.get("prefix", "")),
            states=[OperationState.WATCHING],
            due_after_ms=int(filter_.get("due_after_ms", 0)),  # type: ignore[call-overload]
            due_before_ms=0,
            page_token="",
            page_size=100,
        )
        out, _ = listing.list_page(query, p.operations_view(), operation_status_with_progress)
        times.append((time.perf_counter() - start) * 1000)
        assert out or filter_.get("due_after_ms")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument("--sizes", default="10000,100000,300000")
    parser.add_argument("--quick", action="store_true")
    a = parser.parse_args()
    if a.quick:
        a.rounds, a.ops, a.sizes = 1, 2_000, "1000,5000"
    loop = asyncio.new_event_loop()
    rng = random.Random(16)
    rows = []
    for label, make in (
        ("sequential", lambda n: [f"op-{i:09d}" for i in range(n)]),
        ("random ids", lambda n: [f"{rng.getrandbits(64):016x}" for _ in range(n)]),
    ):
        ids: list[str] = make(a.ops)
        with_idx: list[float] = []
        without: list[float] = []
        for _ in range(a.rounds):
            without.append(cycle(loop, False, ids))
            with_idx.append(cycle(loop, True, ids))
        ratios = [w / b for w, b in zip(with_idx, without, strict=True)]
        rows.append(
            [
                label,
                f"{statistics.median(without):,.0f}",
                f"{statistics.median(with_idx):,.0f}",
                f"{statistics.median(ratios):.2f}",
                f"{min(ratios):.2f}-{max(ratios):.2f}",
            ]
        )
    print(f"register+cancel cycle, {a.ops} ops, {a.rounds} interleaved rounds")
    print(
        markdown_table(
            ["ids", "never listed ns/op", "listed ns/op", "listed / never (median)", "range"], rows
        )
    )
    rows = []
    for size in (int(s) for s in a.sizes.split(",")):
        p = _purgatory(loop, size + 10)
        ids = [f"{rng.getrandbits(64):016x}" for _ in range(size)]
        reqs = _requests(ids, keys=max(1, size // 1000))
        for b in range(0, size, 10_000):
            p.register(reqs[b : b + 10_000], [""] * len(reqs[b : b + 10_000]))
        start = time.perf_counter()
        p.operations_view()
        build_ms = (time.perf_counter() - start) * 1000
        filters: list[tuple[str, Callable[[], float]]] = [
            ("none", lambda p=p: page_ms(p)),  # type: ignore[misc]
            ("prefix 'a'", lambda p=p: page_ms(p, prefix="a")),  # type: ignore[misc]
            ("key (1000 watchers)", lambda p=p: page_ms(p, key="k0")),  # type: ignore[misc]
            ("due range, no match", lambda p=p: page_ms(p, due_after_ms=2**62)),  # type: ignore[misc]
        ]
        rows.append([f"{size:,}", f"{build_ms:.0f}", *(f"{f():.2f}" for _, f in filters)])
        p.shutdown_engine()
    print("\nfirst page (100) in ms, median of 5, by pending operations")
    print(
        markdown_table(["pending", "index build (first listing)", *(n for n, _ in filters)], rows)
    )


if __name__ == "__main__":
    main()
