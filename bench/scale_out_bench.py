"""Scale-out benchmark: replicated vs local-journal vs in-memory, and takeover time.

Three parts, in one run on one machine (docs/benchmarks.md "Scale-out"):

1. **Pairs/s.** Three purgatory servers run as subprocesses side by side: an in-memory
   purgatory, a durable one on the local journal (fsync ``always``), and a replicated one
   on a three-node NATS JetStream cluster started here (nats-server 2.15.1,
   ``sync_interval: always``, R3). Against each in turn (rounds interleaved), ``--clients``
   concurrent clients each loop: register an operation on a private key
   (``TryCompleteElseWatch``) then signal that key (``CheckAndComplete``); one pair is one
   acknowledged registration plus one acknowledged signal that completed it (three
   journal records for the durable kinds). Reported: pairs/s per kind and the ratios. A
   fourth server replicates with snapshots off (``snapshot_messages = snapshot_bytes =
   0``: no mirror of the state), which prices the owner's mirror and its snapshots.
2. **Takeover.** Two servers replicate purgatory ``t``; ``--kills`` times: load it with
   registrations (ids recorded when acknowledged), SIGKILL the owner, start a fresh
   standby, and time from the kill to the first successful registration through the new
   owner. Then every acknowledged id must be found there (pending or with an outcome).
   Reported: takeover p50/max and acknowledged registrations lost (must be 0).

3. **What clients see** (:mod:`bench._failover_clients`): per failure kind (owner
   SIGKILL, owner SIGSTOP, owner cut off from NATS, NATS lease-bucket leader killed),
   ``--failovers`` runs with two writers and a subscriber: client-visible unavailability
   p50/max, hung calls and stalled subscribers (targets 0).

Run: ``python -m bench.scale_out_bench`` (``--seconds 5 --rounds 2 --clients 32 --kills 10
--lease-ms 1500``). Needs the ``cluster`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.placement import ranked

from bench._common import ratio
from bench._failover_clients import KINDS, failover, summary
from bench._pairs import pairs_per_second
from bench._scale_out_load import first_success, load_until_killed, lost, wait_serving
from harness import ServerProcess

NO_SNAPSHOTS = "replicated-no-snapshots"


def _config(  # noqa: PLR0917 - the bench's own helper
    kind: str,
    name: str,
    data_dir: Path,
    urls: list[str],
    lease_ms: int,
    server_id: str = "",
    *,
    snapshots: int = 0,
) -> str:
    text = f'data_dir = "{data_dir}"\nlog_level = "INFO"\n\n[[purgatories]]\nname = "{name}"\n'
    if kind != "in-memory":
        text += "durable = true\n"
    if kind.startswith("replicated"):
        quoted = ", ".join(f'"{u}"' for u in urls)
        text += (
            f'\n[cluster]\nnats_urls = [{quoted}]\nreplicated = ["{name}"]\nlease_ms = {lease_ms}\n'
            f'server_id = "{server_id}"\n'
        )
        if snapshots:
            text += f"snapshot_messages = {snapshots}\n"
        if kind == NO_SNAPSHOTS:
            text += "snapshot_messages = 0\nsnapshot_bytes = 0\n"
    return text


def _snapshot_lines(root: Path) -> tuple[int, list[int]]:
    """Snapshots written and the messages each takeover tailed, from the servers' logs."""
    written, tailed = 0, []
    for log in root.glob("t*.log"):
        for line in log.read_text(errors="replace").splitlines():
            written += "purged what came before" in line
            if "messages tailed" in line:
                tailed.append(int(line.split(" messages tailed")[0].rsplit(" ", 1)[1]))
    return written, tailed


async def takeovers(
    root: Path, urls: list[str], kills: int, lease_ms: int, snapshots: int = 0
) -> dict[str, Any]:
    name = "t"
    count = 0
    # Each replacement ranks below every earlier server (rendezvous placement), so only the
    # kills move the purgatory, never a hand-over to a newcomer.
    ids = ranked(name, [f"id{i}" for i in range(kills + 2)])

    def fresh() -> ServerProcess:
        nonlocal count
        count += 1
        text = _config(
            "replicated",
            name,
            root / f"t{count}",
            urls,
            lease_ms,
            ids[count - 1],
            snapshots=snapshots,
        )
        return ServerProcess(root, label=f"t{count}", config=text, start_timeout_s=60).start()

    servers = []
    for _ in range(2):  # one after the other: the first is a member before the second starts
        servers.append(fresh())
        servers[-1].wait_port()
    times: list[float] = []
    acked: set[str] = set()
    lost_total = 0
    try:
        owner = await first_success(servers, name, 60)
        for kill in range(kills):
            await load_until_killed(owner.address, name, acked, f"k{kill}", 0.5)
            owner.kill()
            killed = time.monotonic()
            servers[servers.index(owner)] = replacement = fresh()
            owner = await first_success(servers, name, 60)
            times.append(time.monotonic() - killed)
            lost_total += await lost(owner.address, name, acked)
            replacement.wait_port()
            print(f"  kill {kill + 1}: takeover {times[-1]:.2f} s, {len(acked)} acked so far")
    finally:
        for server in servers:
            server.stop()
    written, tailed = _snapshot_lines(root)
    return {
        "snapshots": written,
        "tailed_max": max(tailed, default=0),
        "kills": kills,
        "p50": statistics.median(times),
        "max": max(times),
        "min": min(times),
        "acked": len(acked),
        "lost": lost_total,
    }


async def compare(root: Path, urls: list[str], args: argparse.Namespace) -> None:
    servers: dict[str, ServerProcess] = {}
    try:
        names = {"in-memory": "p", "local-journal": "p", "replicated": "p", NO_SNAPSHOTS: "q"}
        for kind, name in names.items():
            text = _config(kind, name, root / kind, urls, args.lease_ms)
            servers[kind] = ServerProcess(root, label=kind, config=text, start_timeout_s=60)
            servers[kind].start()
        for server in servers.values():
            server.wait_port()
        for kind, server in servers.items():
            await wait_serving(server.address, names[kind])
        for batch in (1, args.batch):
            rates: dict[str, list[float]] = {kind: [] for kind in servers}
            for r in range(args.rounds):
                for kind, server in servers.items():
                    rate = await pairs_per_second(
                        server.address,
                        names[kind],
                        args.clients,
                        args.seconds,
                        batch=batch,
                        warmup=args.warmup,
                    )
                    rates[kind].append(rate)
                    print(f"  batch {batch} round {r + 1} {kind}: {rate:,.0f} pairs/s")
            best = {kind: statistics.median(values) for kind, values in rates.items()}
            print(
                f"\nwatch+signal pairs/s, {args.clients} clients, {batch} pairs per call pair, "
                f"median of {args.rounds}:"
            )
            for kind, rate in best.items():
                print(
                    f"  {kind:24s} {rate:8,.0f}  ({ratio(rate, best['in-memory']):.2f} x in-memory)"
                )
            vs_local = ratio(best["replicated"], best["local-journal"])
            print(f"  replicated / local-journal: {vs_local:.2f}")
            vs_plain = ratio(best["replicated"], best[NO_SNAPSHOTS])
            print(f"  replicated (snapshots on, the default) / without snapshots: {vs_plain:.2f}\n")
    finally:
        for server in servers.values():
            server.stop()


async def main_async(args: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="scale-out-bench-", dir=args.dir)
            print(f"keeping configs and logs in {tmp}")
        else:
            tmp = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="scale-out-bench-", dir=args.dir)
            )
        root = Path(tmp)
        nats = LocalNatsCluster(root / "nats").start()
        try:
            if not args.skip_pairs:
                await compare(root, nats.urls, args)
            if args.kills:
                print(f"\ntakeover, {args.kills} kills, lease_ms {args.lease_ms}:")
                result = await takeovers(
                    root / "takeover", nats.urls, args.kills, args.lease_ms, args.snapshot_messages
                )
                print(
                    f"  takeover p50 {result['p50']:.2f} s, max {result['max']:.2f} s, "
                    f"min {result['min']:.2f} s; {result['acked']} acknowledged "
                    f"registrations, {result['lost']} lost; {result['snapshots']} snapshots "
                    f"written, at most {result['tailed_max']} messages tailed by a takeover"
                )
            for kind in args.failover_kinds.split(",") if args.failovers else ():
                outcomes = [
                    await failover(root / "failover", nats, kind, run, args.lease_ms)
                    for run in range(args.failovers)
                ]
                r = summary(kind, outcomes)
                print(
                    f"failover {kind}: client-visible unavailability p50 {r['p50']:.2f} s, "
                    f"max {r['max']:.2f} s ({r['runs']} runs x 2 writers); hung calls "
                    f"{r['hung']}, stalled subscribers {r['stalled']} (gave up after their "
                    f"resume policy: {r['gave_up']}), "
                    f"{r['acknowledged']} pairs acknowledged"
                )
        finally:
            nats.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds before each")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--batch", type=int, default=100, help="pairs per batch call pair")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--lease-ms", type=int, default=1500)
    parser.add_argument(
        "--snapshot-messages",
        type=int,
        default=0,
        help="the takeover servers' [cluster] snapshot_messages (0: the server's default)",
    )
    parser.add_argument("--dir", default=None, help="where the temporary directory goes")
    parser.add_argument("--keep", action="store_true", help="keep that directory (the logs)")
    parser.add_argument("--skip-pairs", action="store_true", help="only the takeover part")
    parser.add_argument(
        "--failovers", type=int, default=3, help="runs per failure kind of part 3 (0: none)"
    )
    parser.add_argument(
        "--failover-kinds", default=",".join(KINDS), help="comma-separated: " + ",".join(KINDS)
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
