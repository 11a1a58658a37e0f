"""What one abusive batch costs the server: the shapes of abuse patterns 4 and 5/6.

Two shapes, each sent one batch at a time (the next after the answer) to a fresh server:

- ``keys``: ``BatchTryCompleteElseWatch`` of 50 operations of 64 fresh 256-character
  keys each (``bench.abuse_bench`` pattern 4's batch, 850 KB);
- ``payloads``: ``BatchTryCompleteElseWatch`` of 50 operations of one key and a 32 KiB
  payload, then the ``CheckAndComplete`` that completes them (patterns 5 and 6's round,
  1.6 MB).

Reported per server and shape: the server process's CPU per batch
(``ServerProcess.cpu_seconds``: ``/proc/<pid>/stat``, all its threads) and the client's
round trip per batch (p50, p99).
A probe request that arrives while a batch is handled waits for it, so these bound what
the abuse benchmark's probe sees. ``--compare-src DIR`` runs another source tree's server
(``git archive <commit> | tar -x -C DIR``, engine compiled there) in the same
interleaved rounds; ratios are per round, then the median.

    python -m bench.batch_shapes_bench [--rounds 3] [--batches 40] [--compare-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import (
    OWN_CONNECTION,
    bench_server,
    markdown_table,
    percentile,
    run_context,
    tree_pythonpath,
    write_json,
)

CONFIG = "[defaults]\nmax_pending = 1000000\nretained_events = 1000\n"


class Shape(NamedTuple):
    """``make(n)``: batch ``n``'s messages, built before the clock starts (the client's
    encoding is not the server's cost); ``send``: the batch's calls, timed."""

    make: Callable[[int], tuple[Any, ...]]
    send: Callable[[Any, tuple[Any, ...]], Awaitable[None]]


def _keys(n: int) -> tuple[Any, ...]:
    specs = [
        pb.OperationSpec(
            keys=[f"{n:05d}-{i:02d}-{j:02d}-".ljust(256, "k") for j in range(64)],
            timeout_ms=600_000,
        )
        for i in range(50)
    ]
    return (pb.BatchTryCompleteElseWatchRequest(purgatory="default", operations=specs),)


async def _send_keys(stub: Any, messages: tuple[Any, ...]) -> None:
    await stub.BatchTryCompleteElseWatch(messages[0])


def _payloads(n: int) -> tuple[Any, ...]:
    key = f"payloads-{n}"
    spec = pb.OperationSpec(keys=[key], timeout_ms=600_000, payload=bytes(32 * 1024))
    return (
        pb.BatchTryCompleteElseWatchRequest(purgatory="default", operations=[spec] * 50),
        pb.CheckAndCompleteRequest(purgatory="default", key=key),
    )


async def _send_payloads(stub: Any, messages: tuple[Any, ...]) -> None:
    await stub.BatchTryCompleteElseWatch(messages[0])
    await stub.CheckAndComplete(messages[1])


SHAPES = {"keys": Shape(_keys, _send_keys), "payloads": Shape(_payloads, _send_payloads)}


async def _measure(root: Path, label: str, src: str | None, batches: int) -> dict[str, Any]:
    """Both shapes on one fresh server: CPU per batch (ms) and round trips (ms)."""
    config = root / "shapes.toml"
    config.write_text(CONFIG)
    env = {"PYTHONPATH": tree_pythonpath(src)} if src else None
    out: dict[str, Any] = {}
    with bench_server(root, label, "--config", str(config), env=env) as server:
        async with grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as ch:
            stub: Any = pb_grpc.PurgatoryServiceStub(ch)  # type: ignore[no-untyped-call]
            for name, shape in SHAPES.items():
                await shape.send(stub, shape.make(-1))  # warm-up: first calls' costs out
                made = [shape.make(n) for n in range(batches)]
                rtts: list[float] = []
                cpu0 = server.cpu_seconds()
                for messages in made:
                    began = time.perf_counter()
                    await shape.send(stub, messages)
                    rtts.append((time.perf_counter() - began) * 1000)
                cpu = server.cpu_seconds() - cpu0
                out[name] = {"cpu_ms_per_batch": cpu * 1000 / batches, "rtts_ms": rtts}
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    subjects: list[tuple[str, str | None]] = [("this tree", None)]
    if args.compare_src:
        subjects.append((args.compare_label, args.compare_src))
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        root = Path(tempfile.mkdtemp(prefix="shapes-bench-"))
        order = subjects if r % 2 == 0 else subjects[::-1]  # alternate who goes first
        rounds.append(
            {
                label: await _measure(root, f"s{i}", src, args.batches)
                for i, (label, src) in enumerate(order)
            }
        )
        shutil.rmtree(root, ignore_errors=True)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    return {"context": run_context(), "args": vars(args), "rounds": rounds}


def report(result: dict[str, Any]) -> str:
    rounds = result["rounds"]
    labels = list(rounds[0])
    rows = []
    for shape in SHAPES:
        for label in labels:
            cpu = [r[label][shape]["cpu_ms_per_batch"] for r in rounds]
            rtts = sorted(x for r in rounds for x in r[label][shape]["rtts_ms"])
            ratio = "-"
            if label != labels[0]:
                base = labels[0]
                # CPU comes in 10 ms ticks: a short run may read none (no ratio then).
                ratios = [
                    r[base][shape]["cpu_ms_per_batch"] / r[label][shape]["cpu_ms_per_batch"]
                    for r in rounds
                    if r[label][shape]["cpu_ms_per_batch"] > 0
                ]
                ratio = f"{statistics.median(ratios):.2f}" if ratios else "n/a (too short)"
            rows.append(
                [
                    shape,
                    label,
                    ", ".join(f"{c:.2f}" for c in cpu),
                    round(statistics.median(cpu), 2),
                    round(percentile(rtts, 0.5), 2),
                    round(percentile(rtts, 0.99), 2),
                    ratio,
                ]
            )
    headers = [
        "shape",
        "server",
        "server CPU ms per batch, per round",
        "median",
        "round trip p50 ms",
        "p99 ms",
        "this tree / it (CPU, median of rounds)",
    ]
    return markdown_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--batches", type=int, default=40, help="batches per shape")
    parser.add_argument("--compare-src", help="also run a server from this source tree")
    parser.add_argument("--compare-label", default="compared tree", help="its name")
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    print(report(result))
    print(f"raw numbers: {write_json('batch_shapes_bench', result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
