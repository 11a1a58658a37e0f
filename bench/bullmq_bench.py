"""Purgatory's worker groups vs BullMQ on the same machine, same run: delayed jobs
delivered when due and acked (docs/benchmarks.md section 23).

Both consumers are Node.js (``bench/node/purgatory_delayed.js`` through the Node client,
``bench/node/bullmq_delayed.js`` through npm ``bullmq``), with the same number of workers
(``--workers``: for Purgatory members of one group, each its own client; for BullMQ
``Worker`` objects, each its own Redis connection) and the same jobs in flight per worker
(``--concurrency``: a member's ``prefetch``, a Worker's ``concurrency``). The workload is
the same: ``N`` jobs enqueued in chunks of 1000 (``batchTryCompleteElseWatch`` with
``dueTimeMs`` / ``Queue.addBulk`` with ``delay``), due ``--lead-ms`` after the run starts
and spread evenly over ``spread`` ms; each is delivered when due, its lateness noted
(received minus due, one host's clock) and acked (Purgatory: a member's acks in one
``ackBatch`` per half its prefetch, or 10 ms after the first, on the client's AckStream;
BullMQ: the processor returns, the Worker moves the job to completed and fetches the
next in one call). Two phases per round:

- **burst**: ``--jobs`` due within ``--spread-ms`` (more than either system delivers in that
  time): deliveries acked per second over the window from the first due time to the last
  ack, the systems' capacity;
- **paced**: ``--paced-jobs`` due over ``--paced-spread-ms`` (below both capacities): the
  due-time lateness p50/p99/max of a system keeping up.

Purgatory: one server process (in-memory purgatory); BullMQ: Debian's ``redis-server``
(``--save "" --appendonly no``: in memory too). Interleaved rounds (bench._rounds), the
order flipping each round.

    python -m bench.bullmq_bench [--rounds 3] [--jobs 20000] [--workers 4]
        [--concurrency 16] [--json out.json]

Needs ``make node-build`` (client/node/dist), ``npm ci --prefix bench/node`` and
``redis-server`` on the PATH.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._common import bench_server, markdown_table, run_context, write_json
from bench._rounds import Rounds

NODE = Path(__file__).resolve().parent / "node"
SCRIPTS = {"purgatory": NODE / "purgatory_delayed.js", "bullmq": NODE / "bullmq_delayed.js"}
SYSTEMS = ("purgatory", "bullmq")
PHASES = ("burst", "paced")
PURGATORY = "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def redis_server(root: Path) -> Iterator[int]:
    """A throw-away redis-server on loopback, no persistence; its port."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found (apt-get install redis-server)")
    port = _free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with (root / "redis.log").open("w") as log:
        proc = subprocess.Popen([*argv, "--dir", str(root)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"redis-server did not start (see {root / 'redis.log'})")
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def run_one(system: str, cfg: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        ["node", str(SCRIPTS[system]), json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=cfg["leadMs"] / 1000 + cfg["spreadMs"] / 1000 + 180,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{system} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000, help="burst: jobs")
    parser.add_argument("--spread-ms", type=int, default=500, help="burst: due within")
    parser.add_argument("--paced-jobs", type=int, default=2_000)
    parser.add_argument("--paced-spread-ms", type=int, default=4_000)
    parser.add_argument("--lead-ms", type=int, default=4_000, help="first due time, from start")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16, help="in flight per worker")
    parser.add_argument("--json", help="write the raw numbers here")
    a = parser.parse_args()
    context = run_context()
    rounds: Rounds[dict[str, Any]] = Rounds(SYSTEMS, a.rounds, progress=False)
    phases = {
        "burst": (a.jobs, a.spread_ms),
        "paced": (a.paced_jobs, a.paced_spread_ms),
    }
    env = {"PURGATORY_DEFAULTS_MAX_PENDING": str(max(a.jobs, a.paced_jobs) * 2)}
    with (
        tempfile.TemporaryDirectory(prefix="bullmq-bench-") as tmp,
        redis_server(Path(tmp)) as redis_port,
        bench_server(Path(tmp), "purgatory", "--purgatory", PURGATORY, env=env) as server,
    ):
        for r, order in enumerate(rounds):
            got: dict[str, dict[str, Any]] = {s: {} for s in order}
            for phase in PHASES:
                jobs, spread = phases[phase]
                for system in order:
                    cfg = {
                        "target": server.address,
                        "purgatory": PURGATORY,
                        "redisPort": redis_port,
                        "jobs": jobs,
                        "spreadMs": spread,
                        "leadMs": a.lead_ms,
                        "workers": a.workers,
                        "concurrency": a.concurrency,
                        "tag": f"r{r}-{phase}",
                    }
                    res = run_one(system, cfg)
                    got[system][phase] = res
                    print(
                        f"round {r + 1}: {phase}: {system}: {res['acked_per_s']:,.0f} acked/s, "
                        f"lateness p99 {res['lateness_p99_ms']} ms"
                        + (" (enqueue ran past the lead)" if res["late_enqueue"] else ""),
                        file=sys.stderr,
                    )
            for system in order:
                rounds.record(system, got[system])
    rows = []
    for phase in PHASES:
        for system in SYSTEMS:
            runs = [result[system][phase] for result in rounds.results]
            rows.append(
                [
                    phase,
                    system,
                    phases[phase][0],
                    statistics.median(x["acked_per_s"] for x in runs),
                    min(x["acked_per_s"] for x in runs),
                    max(x["acked_per_s"] for x in runs),
                    statistics.median(x["lateness_p50_ms"] for x in runs),
                    statistics.median(x["lateness_p99_ms"] for x in runs),
                    statistics.median(x["lateness_max_ms"] for x in runs),
                ]
            )
    print(
        markdown_table(
            [
                "phase",
                "system",
                "jobs",
                "acked/s (median)",
                "min",
                "max",
                "lateness p50 ms",
                "p99 ms",
                "max ms",
            ],
            rows,
        )
    )
    for phase in PHASES:

        def rate(x: dict[str, Any], phase: str = phase) -> float:
            return float(x[phase]["acked_per_s"])

        def p99(x: dict[str, Any], phase: str = phase) -> float:
            return float(x[phase]["lateness_p99_ms"])

        each = rounds.ratios("purgatory", "bullmq", rate)
        late = rounds.ratios("bullmq", "purgatory", p99)
        print(
            f"{phase}: purgatory/bullmq acked/s per round {', '.join(f'{x:.2f}x' for x in each)}; "
            f"bullmq/purgatory lateness p99 per round {', '.join(f'{x:.2f}x' for x in late)}"
        )
    print(rounds.load_report())
    path = write_json(
        "bullmq",
        {"context": context, "args": vars(a), "rounds": rounds.results, "loads": rounds.loads},
        a.json,
    )
    print(f"raw numbers: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
