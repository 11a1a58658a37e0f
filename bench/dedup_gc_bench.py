"""What the dedup window costs the cyclic garbage collector, records against packed entries.

The dedup window (server core/finished_ids.py) remembers every finished id for minutes,
hundreds of thousands of them under load. It used to keep each id's definition and
outcome records (named tuples, a condition dataclass, an enum state: four objects the
collector tracks per id), so every full collection walked them all; it now keeps one
plain tuple per id, which the collector stops tracking after its first pass. In one
process, same run, for ``--ids`` remembered ids of a typical shape (one key, a signal's
result, no payload):

- **records**: the former layout and ``add`` (:class:`RecordsWindow`: an ``OrderedDict``
  of ``(definition, outcome)``, the same size estimate);
- **packed**: :class:`FinishedIds` as it is now.

Reported: tracked objects, a full collection's time (median of ``--repeats``, after the
start-up heap is frozen out of the way as the server does), and the time to remember one
id (the completion path's cost).

    python -m bench.dedup_gc_bench [--ids 150000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import OrderedDict

from purgatory_server._service.core.finished_ids import FinishedIds, entry_bytes
from purgatory_server._service.model.conditions import DEFAULT_CONDITION, ResultSnapshot
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome

from bench._common import markdown_table

WINDOW_MS = 300_000


class RecordsWindow:
    """The dedup window's former ``add``: the records themselves, oldest first."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, tuple[OperationDefinition, Outcome]] = OrderedDict()
        self.bytes = 0

    def add(self, definition: OperationDefinition, outcome: Outcome) -> None:
        entries = self.entries
        op_id = outcome.operation_id
        old = entries.pop(op_id, None)
        if old is not None:
            self.bytes -= entry_bytes(*old)
        entries[op_id] = (definition, outcome)
        self.bytes += entry_bytes(definition, outcome)


def _records(n: int) -> list[tuple[OperationDefinition, Outcome]]:
    made = []
    for i in range(n):
        keys = (f"key-{i}",)
        definition = OperationDefinition(keys, 30_000, DEFAULT_CONDITION, b"")
        result = ResultSnapshot(1, (), keys)
        outcome = Outcome(
            i, "default", f"op-{i}", OperationState.COMPLETED, keys, b"", result, 1, 2, 3
        )
        made.append((definition, outcome))
    return made


def _full_collection_ms(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def measure(layout: str, n: int, repeats: int) -> list[object]:
    gc.collect()
    tracked_before = len(gc.get_objects())
    made = _records(n)
    window = RecordsWindow() if layout == "records" else FinishedIds(WINDOW_MS, 1 << 40)
    add = window.add
    began = time.perf_counter()
    for definition, outcome in made:
        add(definition, outcome)
    add_us = (time.perf_counter() - began) / n * 1e6
    del made, definition, outcome
    gc.collect()
    tracked = len(gc.get_objects()) - tracked_before
    pause = _full_collection_ms(repeats)
    del window, add
    gc.collect()
    return [layout, n, tracked, round(pause, 1), round(add_us, 2)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", type=int, default=150_000, help="ids remembered")
    parser.add_argument("--repeats", type=int, default=5, help="full collections timed")
    args = parser.parse_args(argv)
    gc.collect()
    gc.freeze()  # start-up's heap out of the way, as the server does (process_tuning.py)
    rows = [measure(layout, args.ids, args.repeats) for layout in ("records", "packed")]
    headers = ["layout", "ids", "tracked objects", "full collection ms", "us to remember one"]
    print(markdown_table(headers, rows))
    records, packed = rows
    ratio = float(str(packed[3])) / max(float(str(records[3])), 1e-9)
    print(f"full collection, packed / records: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
