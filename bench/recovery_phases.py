"""Recovery of N pending operations in one process, split into phases, and its memory.

Where ``bench.recovery_bench`` times a server subprocess from spawn to serving, this
opens the same kind of data directory with ``create_server`` in this process and reports
the event loop thread's CPU time in each phase of the restore (opening the journal, which
replays it; decoding each pending operation; creating the service's operation objects;
the engine's watch and arm; the rest of the restore loop), then, with ``--memory``, the
bytes per operation that ``tracemalloc`` sees allocated by each source line. Run it
against another source tree by putting that tree first on ``PYTHONPATH`` (the phases are
found by name; a tree without one of them reports it as absent):

    python -m bench.recovery_phases --pending 200000 [--data DIR] [--memory]
    PYTHONPATH=<tree>/server:<tree>/proto python -m bench.recovery_phases --data DIR

``--data`` reuses (or creates, if missing) a data directory written as
``bench.recovery_bench`` writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from purgatory_server._engine import purgatory as engine
from purgatory_server._journal import journal
from purgatory_server._service import ServerConfig, create_server

from bench._common import first_module
from bench.recovery_bench import NAME, write_journal
from harness import rss_bytes

# Each module under this tree's name, then the flat _service/ name of older trees.
_codec = first_module(
    "purgatory_server._service.durable.codec", "purgatory_server._service.journal_codec"
)
_table = first_module(
    "purgatory_server._service.core.operation_table", "purgatory_server._service.operation_table"
)
_store = first_module(
    "purgatory_server._service.durable.local_store", "purgatory_server._service.durable"
)
PHASES: list[tuple[Any, str, str]] = [
    (journal.Journal, "open", "journal open (replay)"),
    (getattr(_codec, "PendingDecoder", None), "__call__", "decode pending operations"),
    (getattr(_table, "OperationTable", None), "restore", "operation objects (table.restore)"),
    (engine.DelayedOperationPurgatory, "watch_and_arm_all", "engine watch and arm"),
    (getattr(_store, "DurableStore", None), "_restore", "restore total"),
]


def _timed(spent: dict[str, float], label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.thread_time() - started

    return timed


async def _restore(data: Path, n: int, memory: bool) -> dict[str, Any]:
    spent: dict[str, float] = {}
    for owner, name, label in PHASES:
        if hasattr(owner, name):
            setattr(owner, name, _timed(spent, label, getattr(owner, name)))
    config = ServerConfig(listen="127.0.0.1:0", data_dir=str(data))
    gc.collect()
    if memory:
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
    rss = rss_bytes(os.getpid())
    started = time.thread_time()
    server, _port = await create_server("127.0.0.1:0", config)
    spent["create_server total"] = time.thread_time() - started
    gc.collect()
    out: dict[str, Any] = {
        "pending": server.registry.get(NAME).stats().pending,
        "loop_thread_cpu_s": spent,
        "rss_bytes_per_op": (rss_bytes(os.getpid()) - rss) / n,
    }
    if memory:
        stats = tracemalloc.take_snapshot().compare_to(before, "lineno")
        tracemalloc.stop()
        out["traced_bytes_per_op"] = sum(s.size_diff for s in stats) / n
        out["by_line"] = [(str(s.traceback), s.size_diff / n, s.count_diff / n) for s in stats[:30]]
    await server.stop(0.5)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pending", type=int, default=200_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--data", help="data directory to reuse (written if missing)")
    p.add_argument("--memory", action="store_true", help="tracemalloc by source line")
    a = p.parse_args()
    os.environ.setdefault("PURGATORY_DEFAULTS_MAX_PENDING", str(4 * a.pending))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(a.data) if a.data else Path(tmp) / "data"
        if not (data / NAME).exists():
            write_journal(data, a.pending, a.keys)
        out = asyncio.run(_restore(data, a.pending, a.memory))
    print(f"recovery phases: {out['pending']:,} pending, load {os.getloadavg()}", file=sys.stderr)
    for label, seconds in out["loop_thread_cpu_s"].items():
        print(f"  {label:36s} {seconds:7.2f} s  {seconds / a.pending * 1e6:6.1f} µs/op")
    print(f"  RSS growth per operation: {out['rss_bytes_per_op']:,.0f} B")
    if a.memory:
        print(f"  traced allocations per operation: {out['traced_bytes_per_op']:,.0f} B")
        for line, size, count in out["by_line"]:
            print(f"    {size:7.1f} B/op {count:5.2f} objects/op  {line}")


if __name__ == "__main__":
    main()
