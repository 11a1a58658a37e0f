"""``watch``'s micro-batch time against its ``--interval``, with a live load on a real server.

A durable purgatory on loopback receives a steady stream of registrations and signals
(about 400 outcomes/s) from a background thread; ``start_watch`` runs with
``interval_s`` and ``--out``, and each batch's ``triggerExecution`` time and row count
are printed from the query's progress. ``--old REF`` runs the ``watch`` module of a git
revision instead (read with ``git show``), so the version before a change can be timed
in the same run. Batch 0 includes the query's start.

``python -m bench.pipeline_watch [--seconds 75] [--interval 5] [--old eb09c8a]``
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from harness.server import ServerProcess

NAME = "w"


def _load(target: str, stop: threading.Event) -> None:
    with grpc.insecure_channel(target) as channel:
        stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        i = 0
        while not stop.is_set():
            try:
                for _ in range(20):
                    stub.TryCompleteElseWatch(
                        pb.TryCompleteElseWatchRequest(
                            purgatory=NAME,
                            operation_id=f"o{i}",
                            keys=[f"k{i % 50}"],
                            timeout_ms=60_000,
                            condition=pb.Condition(),
                        ),
                        timeout=10,
                    )
                    i += 1
                stub.CheckAndComplete(
                    pb.CheckAndCompleteRequest(
                        purgatory=NAME, key=f"k{i % 50}", signal=pb.Signal(source="r1")
                    ),
                    timeout=10,
                )
            except grpc.RpcError:
                return  # the server is stopping
            time.sleep(0.05)


def _start_watch(old: str | None) -> Any:
    if old is None:
        from purgatory_pipeline.watch import start_watch

        return start_watch
    source = subprocess.run(
        ["git", "show", f"{old}:pipeline/purgatory_pipeline/watch.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "watch_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("watch_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.start_watch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=75.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--old", help="git revision whose watch module to time instead")
    args = parser.parse_args()
    from purgatory_pipeline.session import get_spark

    start_watch = _start_watch(args.old)
    root = Path(tempfile.mkdtemp(prefix="pipeline-watch-"))
    server = ServerProcess(
        root,
        [
            "--data-dir",
            str(root / "data"),
            "--purgatory",
            NAME,
            "--durable",
            "--log-level",
            "WARNING",
        ],
    )
    with server:
        stop = threading.Event()
        threading.Thread(target=_load, args=(server.address, stop), daemon=True).start()
        conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
        spark = get_spark("local[2]", **conf)
        spark.sparkContext.setLogLevel("ERROR")
        query = start_watch(
            spark,
            server.address,
            NAME,
            out=str(root / "agg"),
            checkpoint=str(root / "ck"),
            interval_s=args.interval,
        )
        batches: dict[int, tuple[int, int]] = {}
        started = time.monotonic()
        while time.monotonic() - started < args.seconds:
            time.sleep(1)
            for p in query.recentProgress:
                batches[p["batchId"]] = (
                    p["durationMs"].get("triggerExecution", 0),
                    p["numInputRows"],
                )
        query.stop()
        stop.set()
    label = f"watch of {args.old}" if args.old else "watch (this tree)"
    print(f"\n{label}, --interval {args.interval:g} s, {args.seconds:g} s of load:")
    print("| batch | ms | rows |\n| ---: | ---: | ---: |")
    for batch, (ms, rows) in sorted(batches.items()):
        print(f"| {batch} | {ms:,} | {rows:,} |")
    later = [ms for b, (ms, _) in batches.items() if b > 0]
    over = sum(ms > args.interval * 1000 for ms in later)
    print(f"batches after the first: {len(later)}, over the interval: {over}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
