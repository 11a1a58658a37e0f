"""Durable-purgatory benchmark: watch+signal throughput by fsync policy; recovery time.

Throughput, side by side in one run through the real server (a ``python -m
purgatory_server`` subprocess per measurement, the load generator in this process):
W concurrent workers each loop ``TryCompleteElseWatch`` (one fresh key, ANY_KEY, no wait)
then ``CheckAndComplete`` on that key, which completes it; a *pair* is both answers.
Modes: in-memory, durable ``interval`` (10 ms), durable ``always``. The modes are
interleaved over ``--rounds`` rounds (memory, interval, always, memory, ...) so drifting
machine load hits them alike; each mode's median pairs/s is reported with its ratio to
in-memory.

Recovery: a data directory holding N pending operations (written with the journal
library, as the server would: registration records with due times an hour ahead) is
opened by a fresh server; the time from spawning the process to its ``--port-file``
appearing (it writes it once it serves) is measured, next to the same for an empty data
directory (interpreter + imports + gRPC start), so the difference is the recovery.

    python -m bench.durable_bench [--duration 3] [--rounds 3] [--workers 64] [--batch 100]
                                  [--recovery 100000,1000000] [--json out.json]

Each mode is also measured in batch form (``BatchTryCompleteElseWatch`` of ``--batch``
fresh keys, then ``BatchCheckAndComplete`` of them), where the server's own cost, and so
the journal's, is a larger share of a pair than the Python load generator's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
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

from bench._common import bench_server, markdown_table, run_context, write_json
from bench._pairs import pairs_per_second
from harness import ServerProcess

NAME = "bench"
MODES = {
    "in-memory": [],
    "durable, fsync interval (10 ms)": ["--durable", "--fsync", "interval"],
    "durable, fsync always": ["--durable", "--fsync", "always"],
}


def start_server(root: Path, label: str, extra: list[str]) -> ServerProcess:
    """A server on ``root/<label>`` serving (``ready_s``: spawn -> port file, i.e. serving)."""
    server = bench_server(
        root,
        label,
        *extra,
        data_dir=root / label,
        env={"PURGATORY_DEFAULTS_MAX_PENDING": "2000000"},
        start_timeout_s=600,  # recovering a million operations
    )
    server.start().wait_port()
    return server


def throughput(args: argparse.Namespace, root: Path) -> dict[str, list[float]]:
    """Median-able rates per "<mode>, <form>", the modes interleaved round by round."""
    forms = {"unbatched": 1, f"batches of {args.batch}": args.batch}
    results: dict[str, list[float]] = {f"{mode}, {form}": [] for form in forms for mode in MODES}
    run = 0
    for r in range(args.rounds):
        for form, batch in forms.items():
            for mode, extra in MODES.items():
                run += 1
                server = start_server(root, f"tp-{run}", ["--purgatory", NAME, *extra])
                try:
                    rate = asyncio.run(
                        pairs_per_second(
                            server.address,
                            NAME,
                            args.workers,
                            args.duration,
                            batch=batch,
                            warmup=args.warmup,
                        )
                    )
                finally:
                    server.stop(60)
                results[f"{mode}, {form}"].append(rate)
                print(f"round {r + 1}: {mode}, {form}: {rate:,.0f} pairs/s", file=sys.stderr)
    return results


def write_pending(data_dir: Path, count: int, keys: int = 1000) -> None:
    """``count`` pending registrations, as the server journals them, due in an hour."""
    write_settings(data_dir, PurgatorySettings(name=NAME, durable=True, max_pending=2_000_000))
    condition = condition_to_proto(ConditionSpec()).SerializeToString()
    now = time.time_ns() // 1_000_000
    config = JournalConfig(fsync=FsyncPolicy.NEVER, auto_compact=False)
    with Journal.open(journal_dir(data_dir, NAME), config) as journal:
        batch: list[JournalRecord] = []
        for i in range(count):
            reg = JournalRecord.OperationRegistered(
                purgatory=NAME,
                operation_id=f"op-{i}",
                keys=[f"key-{i % keys}"],
                timeout_ms=3_600_000,
                condition=condition,
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


async def _pending(port: int) -> int:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        info = await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))
        return int(info.purgatory.pending)
    finally:
        await channel.close()


def recovery(sizes: list[int], root: Path) -> list[dict[str, Any]]:
    rows = []
    baseline = start_server(root, "empty", [])
    baseline.stop(60)
    for n in sizes:
        data_dir = root / f"rec-{n}"
        started = time.perf_counter()
        write_pending(data_dir, n)
        written = time.perf_counter() - started
        size = sum(p.stat().st_size for p in journal_dir(data_dir, NAME).iterdir())
        server = start_server(root, f"rec-{n}", [])
        try:
            pending = asyncio.run(_pending(server.port))
        finally:
            server.stop(60)
        assert pending == n, (pending, n)
        rows.append(
            {
                "pending": n,
                "journal_mb": size / 1e6,
                "write_s": written,
                "start_to_serving_s": server.ready_s,
                "empty_start_s": baseline.ready_s,
                "recovery_s": server.ready_s - baseline.ready_s,
            }
        )
        print(f"recovery {n:,}: {server.ready_s:.2f} s to serving", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds before each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--recovery", default="100000,1000000")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    context = run_context()
    with tempfile.TemporaryDirectory(prefix="durable-bench-") as tmp:
        root = Path(tmp)
        rates = throughput(args, root)
        sizes = [int(s) for s in args.recovery.split(",") if s]
        rec = recovery(sizes, root)
    rows = []
    for label, r in rates.items():
        form = label.split(", ")[-1]
        base = statistics.median(rates[f"in-memory, {form}"])
        rows.append([label, statistics.median(r), min(r), max(r), statistics.median(r) / base])
    print(f"workers {args.workers}, {args.rounds} rounds x {args.duration:g} s, load {context}")
    print(markdown_table(["mode", "pairs/s (median)", "min", "max", "ratio to in-memory"], rows))
    print()
    print(
        markdown_table(
            [
                "pending ops",
                "journal MB",
                "start to serving (s)",
                "empty start (s)",
                "recovery (s)",
            ],
            [
                [
                    r["pending"],
                    r["journal_mb"],
                    r["start_to_serving_s"],
                    r["empty_start_s"],
                    r["recovery_s"],
                ]
                for r in rec
            ],
        )
    )
    out = write_json(
        "durable_bench", {"context": context, "throughput": rates, "recovery": rec}, args.json
    )
    print(f"raw numbers: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
