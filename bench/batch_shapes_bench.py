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
from bench._rounds import Rounds

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


async def run(args: argparse.Namespace) -> Rounds[dict[str, Any]]:
    """``--rounds`` interleaved rounds, each tree's server a fresh one every round."""
    trees: dict[str, str | None] = {"this tree": None}
    if args.compare_src:
        trees[args.compare_label] = args.compare_src

    async def measure(label: str) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="shapes-bench-", ignore_cleanup_errors=True) as tmp:
            return await _measure(Path(tmp), "server", trees[label], args.batches)

    return await Rounds[dict[str, Any]](list(trees), args.rounds).run_async(measure)


def _cpu_ms(shape: str) -> Callable[[dict[str, Any]], float]:
    """A round's server CPU ms per batch of ``shape``."""
    return lambda result: float(result[shape]["cpu_ms_per_batch"])


def report(rounds: Rounds[dict[str, Any]]) -> str:
    base = rounds.labels[0]
    rows = []
    for shape in SHAPES:
        cpu_ms = _cpu_ms(shape)
        for label in rounds.labels:
            cpu = rounds.values(label, cpu_ms)
            rtts = sorted(x for r in rounds.results for x in r[label][shape]["rtts_ms"])
            ratio = "-"
            if label != base:
                # CPU comes in 10 ms ticks: a short run may read none (no ratio then).
                med = rounds.median_ratio(base, label, cpu_ms)
                ratio = f"{med:.2f}" if med is not None else "n/a (too short)"
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
    rounds = asyncio.run(run(args))
    print(report(rounds))
    print(rounds.load_report())
    result = {
        "context": run_context(),
        "args": vars(args),
        "rounds": rounds.results,
        "loads_1min": rounds.loads,
    }
    print(f"raw numbers: {write_json('batch_shapes_bench', result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
