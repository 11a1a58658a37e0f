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
import os
import statistics
import subprocess
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
from purgatory_server._service.catalog import journal_dir, write_settings
from purgatory_server._service.conditions import ConditionSpec
from purgatory_server._service.config import PurgatorySettings
from purgatory_server._service.journal_codec import condition_to_proto

from bench._common import markdown_table, run_context, write_json

NAME = "bench"
MODES = {
    "in-memory": [],
    "durable, fsync interval (10 ms)": ["--durable", "--fsync", "interval"],
    "durable, fsync always": ["--durable", "--fsync", "always"],
}


class Server:
    """A server subprocess; ``ready_s`` is spawn -> port file (serving)."""

    def __init__(self, data_dir: Path, extra: list[str]) -> None:
        self.port_file = data_dir.parent / f"port-{os.getpid()}-{time.monotonic_ns()}"
        args = [
            sys.executable,
            "-m",
            "purgatory_server",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            "--port-file",
            str(self.port_file),
            "--log-level",
            "WARNING",
            *extra,
        ]
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            args, env=dict(os.environ, PURGATORY_DEFAULTS_MAX_PENDING="2000000")
        )
        deadline = started + 600
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.perf_counter() > deadline:
                self.proc.kill()
                raise RuntimeError("server did not start")
            time.sleep(0.005)
        self.ready_s = time.perf_counter() - started
        self.port = int(self.port_file.read_text())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.port_file.unlink(missing_ok=True)


async def _pairs(port: int, workers: int, duration: float, batch: int) -> float:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    done = 0
    stop_at = 0.0

    async def worker(w: int) -> None:
        nonlocal done
        i = 0
        while time.perf_counter() < stop_at:
            if batch > 1:
                keys = [f"w{w}-{i}-{j}" for j in range(batch)]
                i += 1
                await stub.BatchTryCompleteElseWatch(
                    pb.BatchTryCompleteElseWatchRequest(
                        purgatory=NAME,
                        operations=[pb.OperationSpec(keys=[k], timeout_ms=60_000) for k in keys],
                    )
                )
                answer = await stub.BatchCheckAndComplete(
                    pb.BatchCheckAndCompleteRequest(
                        purgatory=NAME,
                        signals=[pb.KeySignal(key=k, signal=pb.Signal(amount=1)) for k in keys],
                    )
                )
                assert answer.completed == batch
                done += batch
                continue
            key = f"w{w}-{i}"
            i += 1
            await stub.TryCompleteElseWatch(
                pb.TryCompleteElseWatchRequest(purgatory=NAME, keys=[key], timeout_ms=60_000)
            )
            response = await stub.CheckAndComplete(
                pb.CheckAndCompleteRequest(purgatory=NAME, key=key, signal=pb.Signal(amount=1))
            )
            assert response.completed == 1
            done += 1

    try:
        stop_at = time.perf_counter() + 0.5  # warm-up
        await asyncio.gather(*(worker(w) for w in range(workers)))
        done = 0
        started = time.perf_counter()
        stop_at = started + duration
        await asyncio.gather(*(worker(w + workers) for w in range(workers)))
        return done / (time.perf_counter() - started)
    finally:
        await channel.close()


def throughput(args: argparse.Namespace, root: Path) -> dict[str, list[float]]:
    """Median-able rates per "<mode>, <form>", the modes interleaved round by round."""
    forms = {"unbatched": 1, f"batches of {args.batch}": args.batch}
    results: dict[str, list[float]] = {f"{mode}, {form}": [] for form in forms for mode in MODES}
    run = 0
    for r in range(args.rounds):
        for form, batch in forms.items():
            for mode, extra in MODES.items():
                run += 1
                server = Server(root / f"tp-{run}", ["--purgatory", NAME, *extra])
                try:
                    rate = asyncio.run(_pairs(server.port, args.workers, args.duration, batch))
                finally:
                    server.stop()
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
    empty = root / "empty"
    baseline = Server(empty, [])
    baseline.stop()
    for n in sizes:
        data_dir = root / f"rec-{n}"
        started = time.perf_counter()
        write_pending(data_dir, n)
        written = time.perf_counter() - started
        size = sum(p.stat().st_size for p in journal_dir(data_dir, NAME).iterdir())
        server = Server(data_dir, [])
        try:
            pending = asyncio.run(_pending(server.port))
        finally:
            server.stop()
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
    parser.add_argument("--duration", type=float, default=3.0)
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
