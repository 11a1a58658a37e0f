"""Journal benchmark: append throughput per fsync policy, and recovery time.

What it measures, in one run, side by side:

- **append**: ``--units`` purgatory "units" (one registration, one signal on its key,
  one outcome, appended as three separate appends the way the server acknowledges
  them) spread over ``--threads`` appending threads, each waiting for its append to be
  acknowledged. Policies: ``always`` (group commit), ``interval`` (10 ms), ``never``,
  and the **memory** baseline: the same records built, serialized, framed and applied to
  a :class:`JournalState` in the calling thread under a lock, with no writer thread and no
  file. Ratios are units/s relative to that baseline measured in the same run.
  Each row is the median of ``--repeats`` runs (fsync count: median too).
- **recovery**: a journal of N pending registrations (each watching one key, 64-byte
  payload) is written, closed, and ``Journal.open`` is timed: segment scan, CRC checks,
  protobuf parse, state rebuild and the snapshot handed to the server. ``scan only`` is
  the same files read through ``recover`` with a sink that only parses.

The data directory defaults to a fresh temporary directory under ``--dir`` (default: the
current directory, so fsync hits the same disk the server would use). This is a
benchmark, not a test; numbers on a shared 2-core machine are noisy.

Usage: ``.venv/bin/python -m bench.journal_bench [--units 3000]
[--appenders threads:1,threads:16,tasks:64]
[--recovery 100000,1000000]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig, JournalState, recover
from purgatory_server._journal.framing import encode_frame

from bench._common import markdown_table, run_context, write_json

Records = list[JournalRecord]


def unit(n: int, seq: int) -> tuple[Records, Records, Records]:
    key = f"key-{n % 1024}"
    registration = JournalRecord(
        registered=JournalRecord.OperationRegistered(
            purgatory="bench",
            operation_id=f"op-{n}",
            keys=[key],
            timeout_ms=30_000,
            condition=b"\x1a\x02\x08\x01",
            payload=b"p" * 64,
            due_wall_ms=1_700_000_030_000 + n,
            created_wall_ms=1_700_000_000_000 + n,
        )
    )
    signal = JournalRecord(
        signal=JournalRecord.SignalApplied(
            purgatory="bench", key=key, amount=1, source="r1", applied_wall_ms=1
        )
    )
    outcome = JournalRecord(
        outcome=JournalRecord.Outcome(
            operation_id=f"op-{n}",
            state=JournalRecord.Outcome.STATE_COMPLETED,
            sequence=seq,
            completed_wall_ms=2,
            purgatory="bench",
        )
    )
    return [registration], [signal], [outcome]


class MemoryBaseline:
    """The CPU work of journaling without the journal: validate, frame, apply; no I/O."""

    def __init__(self) -> None:
        self.state = JournalState(10_000)
        self.lock = threading.Lock()
        self.index = 0

    def submit(self, records: Records) -> Future[int]:
        frames = [encode_frame(r.SerializeToString()) for r in records]
        with self.lock:
            first = self.index
            for record, _ in zip(records, frames, strict=True):
                self.state.apply(self.index, record)
                self.index += 1
        done: Future[int] = Future()
        done.set_result(first)
        return done


Submit = Callable[[Records], "Future[int]"]


def run_threads(submit: Submit, units: int, threads: int) -> float:
    """Seconds to append ``units`` units from ``threads`` threads, each waiting for its acks.

    Outcomes are submitted under a lock that assigns their sequence (as the server must,
    so sequences are in journal order) and waited for outside it.
    """
    per_thread = units // threads
    seq_lock = threading.Lock()
    next_seq = [0]
    start = threading.Barrier(threads + 1)

    def worker(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            n = t * per_thread + i
            reg, sig, _ = unit(n, 0)
            submit(reg).result()
            submit(sig).result()
            with seq_lock:
                next_seq[0] += 1
                future = submit(unit(n, next_seq[0])[2])
            future.result()

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    return time.perf_counter() - began


def run_tasks(submit: Submit, units: int, tasks: int) -> float:
    """Seconds to append ``units`` units from ``tasks`` asyncio tasks on one event loop."""
    per_task = units // tasks
    next_seq = [0]

    async def worker(t: int) -> None:
        for i in range(per_task):
            n = t * per_task + i
            reg, sig, _ = unit(n, 0)
            await asyncio.wrap_future(submit(reg))
            await asyncio.wrap_future(submit(sig))
            next_seq[0] += 1  # single-threaded loop: submit order is sequence order
            await asyncio.wrap_future(submit(unit(n, next_seq[0])[2]))

    async def all_workers() -> float:
        began = time.perf_counter()
        await asyncio.gather(*(worker(t) for t in range(tasks)))
        return time.perf_counter() - began

    return asyncio.run(all_workers())


def bench_appends(
    root: Path, units: int, modes: list[tuple[str, int]], repeats: int
) -> list[dict[str, Any]]:
    """Median units/s over ``repeats`` runs per (appenders, policy), baseline first."""
    rows = []
    for mode, concurrency in modes:
        runner = run_threads if mode == "threads" else run_tasks
        done = (units // concurrency) * concurrency
        label = f"{concurrency} {mode}"
        base_rate = statistics.median(
            done / runner(MemoryBaseline().submit, units, concurrency) for _ in range(repeats)
        )
        rows.append(
            {"appenders": label, "policy": "memory", "units_per_s": base_rate, "ratio": 1.0}
        )
        for policy in (FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL, FsyncPolicy.NEVER):
            rates, fsyncs = [], []
            for _ in range(repeats):
                directory = Path(tempfile.mkdtemp(prefix=f"append-{policy.value}-", dir=root))
                config = JournalConfig(fsync=policy, fsync_interval_ms=10)
                journal = Journal.open(directory, config)
                try:
                    rates.append(done / runner(journal.submit, units, concurrency))
                finally:
                    journal.close()
                fsyncs.append(journal.fsync_count)
                shutil.rmtree(directory)
            rate = statistics.median(rates)
            rows.append(
                {
                    "appenders": label,
                    "policy": policy.value,
                    "units_per_s": rate,
                    "ratio": rate / base_rate,
                    "fsyncs": int(statistics.median(fsyncs)),
                    "appends_per_fsync": 3 * done / max(1, statistics.median(fsyncs)),
                }
            )
    return rows


def write_pending(directory: Path, count: int) -> int:
    config = JournalConfig(fsync=FsyncPolicy.NEVER, auto_compact=False)
    with Journal.open(directory, config) as journal:
        batch = 1000
        futures = []
        for start in range(0, count, batch):
            futures.append(
                journal.submit([unit(n, 0)[0][0] for n in range(start, min(count, start + batch))])
            )
        for future in futures:
            future.result()
    return sum(p.stat().st_size for p in directory.glob("*.seg"))


def bench_recovery(root: Path, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for count in sizes:
        directory = Path(tempfile.mkdtemp(prefix=f"recovery-{count}-", dir=root))
        size = write_pending(directory, count)
        gc.collect()

        def parse_only(index: int, record: JournalRecord) -> None:
            pass

        began = time.perf_counter()
        report = recover(directory, parse_only)
        scan_s = time.perf_counter() - began
        gc.collect()
        began = time.perf_counter()
        journal = Journal.open(directory)
        open_s = time.perf_counter() - began
        pending = len(journal.recovered.pending)
        journal.close()
        del journal
        shutil.rmtree(directory)
        assert pending == count == report.records
        rows.append(
            {
                "pending": count,
                "journal_mb": size / 1e6,
                "scan_only_s": scan_s,
                "open_s": open_s,
                "ops_per_s": count / open_s,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=3000)
    parser.add_argument(
        "--appenders",
        default="threads:1,threads:16,tasks:64",
        help="comma-separated mode:count, mode threads or tasks (asyncio)",
    )
    parser.add_argument("--recovery", default="100000,1000000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=".", help="where the temporary data dirs go")
    parser.add_argument("--json", nargs="?", const="", default=None)
    args = parser.parse_args()
    ctx = run_context()
    root = Path(tempfile.mkdtemp(prefix="journal-bench-", dir=args.dir))
    try:
        modes = [(m, int(c)) for m, c in (x.split(":") for x in args.appenders.split(","))]
        appends = bench_appends(root, args.units, modes, args.repeats)
        recovery = bench_recovery(root, [int(n) for n in args.recovery.split(",") if n])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"# journal append: {args.units} units (register + signal + outcome) per row")
    print(f"# context: {ctx}\n")
    print(
        markdown_table(
            ["appenders", "policy", "units/s", "vs memory", "fsyncs", "appends/fsync"],
            [
                [
                    r["appenders"],
                    r["policy"],
                    r["units_per_s"],
                    r["ratio"],
                    r.get("fsyncs", "-"),
                    r.get("appends_per_fsync", "-"),
                ]
                for r in appends
            ],
        )
    )
    print("\n# journal recovery: Journal.open on N pending registrations\n")
    print(
        markdown_table(
            ["pending", "journal MB", "scan+parse s", "open s", "ops/s"],
            [
                [r["pending"], r["journal_mb"], r["scan_only_s"], r["open_s"], r["ops_per_s"]]
                for r in recovery
            ],
        )
    )
    if args.json is not None:
        payload = {"context": ctx, "args": vars(args), "append": appends, "recovery": recovery}
        path = write_json("journal_bench", payload, args.json or None)
        print(f"\n# JSON written to {path}")


if __name__ == "__main__":
    main()
