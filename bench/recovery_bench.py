"""Recovery time and memory per pending operation, before/after in one run.

Recovery: one data directory holding N pending durable operations (registration records
written with the journal library, as the server writes them: a 32-byte payload, one or
two keys out of ``--keys`` shared ones, ANY_KEY, due in an hour) is opened by a fresh
``python -m purgatory_server`` from each source tree in turn (this tree, and
``--compare-src DIR`` if given, e.g. ``git archive <commit> | tar -x -C DIR``); the time
from spawning the process to its ``--port-file`` appearing (written once it serves) is
the recovery, next to the same for an empty data directory; the server's CPU time up to
serving (all threads, from ``/proc``) is reported beside it, since on a shared machine
the wall time also counts other processes' turns. Then the server's RSS
(``VmRSS``) is read and compared with the empty server's: bytes per recovered operation.

Memory of live registrations (``--live N``): an in-memory server from each tree is sent N
operations in ``BatchTryCompleteElseWatch`` batches (no wait; same payload and keys), then
its RSS growth per pending operation is read the same way. ``--live-durable`` sends them
to a durable purgatory instead (created with ``CreatePurgatory``; journaled under the server's
default fsync policy), so the journal's own state for each is counted too.

Trees alternate within each of ``--rounds`` rounds so drifting machine load hits them alike.

    python -m bench.recovery_bench [--pending 1000000] [--live 1000000] [--live-durable]
                                   [--rounds 1]
                                   [--compare-src DIR] [--compare-label base] [--json out]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.durable.catalog import journal_dir, write_settings
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.wire.convert import condition_to_proto

from bench._common import bench_server, markdown_table, run_context, tree_pythonpath, write_json
from harness import ServerProcess

NAME = "bench"
PAYLOAD = bytes(range(32))


def keys_of(i: int, keys: int) -> list[str]:
    """One key for even operations, two for odd ones, out of ``keys`` shared keys."""
    first = f"key-{i % keys}"
    return [first] if i % 2 == 0 else [first, f"key-{(i * 7 + 1) % keys}"]


def write_journal(data_dir: Path, count: int, keys: int) -> None:
    write_settings(data_dir, PurgatorySettings(name=NAME, durable=True, max_pending=4_000_000))
    condition = condition_to_proto(ConditionSpec()).SerializeToString()
    now = time.time_ns() // 1_000_000
    config = JournalConfig(fsync=FsyncPolicy.NEVER, auto_compact=False)
    with Journal.open(journal_dir(data_dir, NAME), config) as journal:
        batch: list[JournalRecord] = []
        for i in range(count):
            reg = JournalRecord.OperationRegistered(
                purgatory=NAME,
                operation_id=f"op-{i}",
                keys=keys_of(i, keys),
                timeout_ms=3_600_000,
                condition=condition,
                payload=PAYLOAD,
                due_wall_ms=now + 3_600_000,
                created_wall_ms=now,
            )
            batch.append(JournalRecord(registered=reg))
            if len(batch) == 10_000:
                journal.submit(batch)
                batch = []
        if batch:
            journal.submit(batch)
        journal.flush()


def start_server(
    src: str | None, label: str, data_dir: Path, tmp: Path
) -> tuple[ServerProcess, float]:
    """A server from source tree ``src`` (None: this one) on ``data_dir``, serving, and
    the CPU seconds (all threads) it used up to then: unlike its ``ready_s`` (spawn ->
    serving), not inflated by other processes' turns on a shared machine."""
    env = {"PURGATORY_DEFAULTS_MAX_PENDING": "4000000"}
    if src is not None:
        env["PYTHONPATH"] = tree_pythonpath(src)
    server = bench_server(tmp, label, data_dir=data_dir, env=env, start_timeout_s=1200)
    server.start().wait_port()
    return server, server.cpu_seconds()


async def _pending(port: int, purgatory: str) -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        info = await stub.GetPurgatory(pb.GetPurgatoryRequest(name=purgatory))
        return int(info.purgatory.pending)


async def _register(
    port: int, n: int, keys: int, batch: int = 1000, purgatory: str = "default"
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        if purgatory != "default":  # a durable one, journaling every registration
            config = pb.PurgatoryConfig(durable=True, max_pending=4_000_000)
            await stub.CreatePurgatory(pb.CreatePurgatoryRequest(name=purgatory, config=config))
        queue = list(range(0, n, batch))

        async def worker() -> None:
            while queue:
                start = queue.pop()
                ops = [
                    pb.OperationSpec(keys=keys_of(i, keys), timeout_ms=3_600_000, payload=PAYLOAD)
                    for i in range(start, min(n, start + batch))
                ]
                await stub.BatchTryCompleteElseWatch(
                    pb.BatchTryCompleteElseWatchRequest(purgatory=purgatory, operations=ops)
                )

        await asyncio.gather(*(worker() for _ in range(4)))


def measure(
    label: str, src: str | None, r: int, *, data: Path, tmp: Path, a: argparse.Namespace
) -> dict[str, Any]:
    """One tree's row of one round: an empty server (and the live registrations), then a
    server recovering ``data``."""
    name = f"{'this' if src is None else 'compare'}-{r}"
    empty, empty_cpu_s = start_server(src, f"empty-{name}", tmp / f"empty-{name}", tmp)
    row: dict[str, Any] = {"tree": label, "round": r + 1, "empty_s": empty.ready_s}
    try:
        empty_rss = empty.rss_bytes()
        if a.live:
            started = time.perf_counter()
            live_name = "live" if a.live_durable else "default"
            asyncio.run(_register(empty.port, a.live, a.keys, purgatory=live_name))
            row["live_register_s"] = time.perf_counter() - started
            assert asyncio.run(_pending(empty.port, live_name)) == a.live
            row["live_bytes_per_op"] = (empty.rss_bytes() - empty_rss) / a.live
    finally:
        empty.stop(120)
    if a.pending:
        server, serving_cpu_s = start_server(src, f"recovering-{name}", data, tmp)
        try:
            assert asyncio.run(_pending(server.port, NAME)) == a.pending
            rss = server.rss_bytes()
        finally:
            server.stop(120)
        row["serving_s"] = server.ready_s
        row["recovery_s"] = server.ready_s - empty.ready_s
        row["serving_cpu_s"] = serving_cpu_s
        row["recovery_cpu_s"] = serving_cpu_s - empty_cpu_s
        row["recovered_bytes_per_op"] = (rss - empty_rss) / a.pending
    return row


def print_table(rows: list[dict[str, Any]], a: argparse.Namespace) -> None:
    headers = ["tree", "round", "empty start (s)"]
    keys = ["tree", "round", "empty_s"]
    if a.pending:
        headers += ["start to serving (s)", "recovery (s)", "recovery CPU (s)"]
        headers += ["RSS per recovered op (B)"]
        keys += ["serving_s", "recovery_s", "recovery_cpu_s", "recovered_bytes_per_op"]
    if a.live:
        headers += ["register (s)", "RSS per live op (B)"]
        keys += ["live_register_s", "live_bytes_per_op"]
    print(f"\npending {a.pending:,}, live {a.live:,}, {a.keys:,} keys, 32-byte payloads\n")
    print(markdown_table(headers, [[row[k] for k in keys] for row in rows]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pending", type=int, default=1_000_000, help="recovered operations")
    p.add_argument("--live", type=int, default=0, help="live-registered operations (memory)")
    p.add_argument("--live-durable", action="store_true", help="--live into a durable purgatory")
    p.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--compare-src", help="also run the server from this source tree")
    p.add_argument("--compare-label", default="baseline")
    p.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = p.parse_args()
    print(f"recovery bench: {os.cpu_count()} CPUs, load {os.getloadavg()}", file=sys.stderr)
    trees: dict[str, str | None] = {"this tree": None}
    if a.compare_src:
        trees[a.compare_label] = a.compare_src
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        data = tmp / "data"
        if a.pending:
            started = time.perf_counter()
            write_journal(data, a.pending, a.keys)
            print(f"journal written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        for r in range(a.rounds):
            for label, src in trees.items():
                rows.append(measure(label, src, r, data=data, tmp=tmp, a=a))
                print(rows[-1], file=sys.stderr)
    print_table(rows, a)
    out = {"context": run_context(), "args": vars(a), "rows": rows}
    print(f"\nraw numbers: {write_json('recovery_bench', out, a.json)}")


if __name__ == "__main__":
    main()
