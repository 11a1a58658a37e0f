"""What clients see during a failover, per failure kind (``scale_out_bench --failovers``).

Each run: two servers replicate purgatory ``f<n>``, A (placement ranks it first) owns it,
B stands by. Two writers, one dialing ``ipv4:A,B`` and one dialing B (routed to A), loop
register-then-signal pairs (one outcome event each; 30 s call deadline), and a subscriber
dialing ``ipv4:A,B`` follows the purgatory's events from sequence 0. Then one fault:

- ``kill``: SIGKILL of A;
- ``pause``: SIGSTOP of A for three leases, then SIGCONT;
- ``partition``: A reaches NATS through :class:`harness.tcp_proxy.Blackhole` proxies,
  cut silently (nothing closed) and healed after three leases;
- ``lease-leader``: SIGKILL of the NATS node leading the lease bucket (restarted after).

Measured from the fault: **unavailability**, per writer the longest time without an
acknowledged write from the fault on (the first one after the fault, unless the service
went away later, as when a lease lapses a little after a NATS node's loss); **hung
calls**, calls that took longer than ``HUNG_S``; **stalled subscribers**, a subscriber
that, 15 s after the writers stopped, has not seen every acknowledged pair's event or saw
a gap or a repeat, while still running; one that ended with an error once the default
``ResumePolicy`` (8 attempts, ~8 s of outage) ran out is counted apart, as **gave up**.
Targets: 0 and 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from purgatory_client import AsyncPurgatoryClient, Event
from purgatory_client.errors import PurgatoryError
from purgatory_server._cluster.layout import LEASE_BUCKET
from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.placement import ranked

from bench._scale_out_load import first_success
from harness import ServerProcess
from harness.tcp_proxy import Blackhole

__all__ = ["KINDS", "Outcome", "failover"]

KINDS = ("kill", "pause", "partition", "lease-leader")
HUNG_S = 6.5  # keepalive (2 s + 2 s) + a reconnect's handshake bound (2 s), rounded up


@dataclass
class Outcome:
    """One run of one kind."""

    unavailable_s: list[float] = field(default_factory=list)  # per writer
    hung: int = 0
    stalled: int = 0  # alive, yet behind or with a gap
    gave_up: int = 0  # ended with an error after its resume policy's attempts
    acknowledged: int = 0


def _config(name: str, data_dir: Path, urls: list[str], lease_ms: int, server_id: str) -> str:
    quoted = ", ".join(f'"{u}"' for u in urls)
    return (
        f'data_dir = "{data_dir}"\nlog_level = "INFO"\n\n[[purgatories]]\nname = "{name}"\n'
        f'durable = true\n\n[cluster]\nnats_urls = [{quoted}]\nreplicated = ["{name}"]\n'
        f'lease_ms = {lease_ms}\njournal_streams = 2\nserver_id = "{server_id}"\n'
    )


async def _lease_leader(urls: list[str]) -> str:
    nc = await nats.connect(servers=urls)
    try:
        info = await nc.jetstream().stream_info(f"KV_{LEASE_BUCKET}")
        return str(info.cluster.leader if info.cluster else "")
    finally:
        await nc.close()


async def _inject(
    kind: str, a: ServerProcess, proxies: list[Blackhole], natsd: LocalNatsCluster, lease_ms: int
) -> int:
    """Cause the failure ``kind`` for three leases, then undo what can be undone; the
    index of the NATS node killed (-1: none)."""
    killed_nats = -1
    if kind == "kill":
        a.kill()
    elif kind == "pause":
        a.pause()
    elif kind == "partition":
        for proxy in proxies:
            proxy.cut()
    else:
        leader = await _lease_leader(natsd.urls)
        killed_nats = [n.name for n in natsd.nodes].index(leader)
        natsd.kill(killed_nats)
    await asyncio.sleep(3 * lease_ms / 1000)
    if kind == "pause":
        a.resume()
    for proxy in proxies:
        proxy.heal()
    return killed_nats


def _score(
    outcome: Outcome,
    *,
    writers: int,
    calls: list[tuple[int, float, float, bool]],
    done: list[str],
    events: list[Event],
    fault: float,
) -> None:
    """Per writer, the longest wait for an acknowledged write after ``fault``; hung calls;
    whether the subscriber saw every acknowledged operation without a gap."""
    for index in range(writers):
        acks = sorted(end for i, start, end, ok in calls if i == index and ok and end > fault)
        gaps = [b - a for a, b in itertools.pairwise([fault, *acks])]
        outcome.unavailable_s.append(max(gaps) if acks else float("inf"))
    outcome.hung = sum(1 for _, start, end, _ in calls if end - start > HUNG_S)
    sequences = [e.sequence for e in events]
    complete = {e.operation_id for e in events} >= set(done)
    gap_free = sequences == list(range(1, len(sequences) + 1))
    outcome.stalled = 0 if (complete and gap_free) or outcome.gave_up else 1
    outcome.acknowledged = len(done)


async def _start_pair(
    root: Path, natsd: LocalNatsCluster, name: str, kind: str, lease_ms: int
) -> tuple[ServerProcess, ServerProcess, list[Blackhole]]:
    """The owner A (behind blackhole proxies for a partition) serving ``name``, then its
    standby B; and the proxies."""
    first, second = ranked(name, ["a", "b"])
    proxies: list[Blackhole] = []
    urls_a = natsd.urls
    if kind == "partition":
        proxies = [await Blackhole("127.0.0.1", n.port).start() for n in natsd.nodes]
        urls_a = [p.url for p in proxies]
    a = ServerProcess(
        root, label=f"{name}-a", config=_config(name, root / f"{name}-a", urls_a, lease_ms, first)
    ).start()
    await asyncio.to_thread(a.wait_port, 60)
    await first_success([a], name, 60)
    b = ServerProcess(
        root,
        label=f"{name}-b",
        config=_config(name, root / f"{name}-b", natsd.urls, lease_ms, second),
    ).start()
    await asyncio.to_thread(b.wait_port, 60)
    return a, b, proxies


async def failover(
    root: Path, natsd: LocalNatsCluster, kind: str, run: int, lease_ms: int
) -> Outcome:
    name = f"f{KINDS.index(kind)}r{run}"
    a, b, proxies = await _start_pair(root, natsd, name, kind, lease_ms)
    both = f"ipv4:{a.address},{b.address}"
    writers = [AsyncPurgatoryClient(t, purgatory=name, timeout=30) for t in (both, b.address)]
    reader = AsyncPurgatoryClient(both, purgatory=name)
    ids = itertools.count()
    calls: list[tuple[int, float, float, bool]] = []
    done: list[str] = []
    events: list[Event] = []
    stop = asyncio.Event()
    outcome = Outcome()

    async def write(index: int) -> None:
        client = writers[index]
        while not stop.is_set():
            op = f"w{next(ids)}"
            started = time.monotonic()
            try:
                await client.try_complete_else_watch([op], 60_000, operation_id=op)
                ok = await client.check_and_complete(op) == 1
            except PurgatoryError:
                ok = False
            calls.append((index, started, time.monotonic(), ok))
            if ok:
                done.append(op)
            await asyncio.sleep(0.02)

    async def subscribe() -> None:
        try:
            async for event in reader.subscribe(after_sequence=0):
                events.append(event)
        except PurgatoryError:
            outcome.gave_up += 1  # its ResumePolicy (8 attempts, ~8 s) ran out

    tasks = [asyncio.ensure_future(write(i)) for i in range(len(writers))]
    tasks.append(asyncio.ensure_future(subscribe()))
    killed_nats = -1
    try:
        await asyncio.sleep(1.0)
        fault = time.monotonic()
        killed_nats = await _inject(kind, a, proxies, natsd, lease_ms)
        await asyncio.sleep(15.0 if kind == "lease-leader" else 6.0)
        stop.set()
        await asyncio.gather(*tasks[:-1])
        await _caught_up(events, done, 15.0)
        _score(outcome, writers=len(writers), calls=calls, done=done, events=events, fault=fault)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in (*writers, reader):
            await client.close()
        await _tear_down((a, b), proxies, natsd, killed_nats)
    return outcome


async def _caught_up(events: list[Event], done: list[str], timeout_s: float) -> None:
    """Until the subscriber has as many events as writes were acknowledged (bounded)."""
    deadline = time.monotonic() + timeout_s
    while len(events) < len(done) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def _tear_down(
    servers: tuple[ServerProcess, ...],
    proxies: list[Blackhole],
    natsd: LocalNatsCluster,
    killed_nats: int,
) -> None:
    """Stop both servers (a paused one resumed first), the proxies, and bring back the
    NATS node a lease-leader run killed."""
    for server in servers:
        with contextlib.suppress(Exception):
            server.resume()
        server.kill()
    for proxy in proxies:
        await proxy.close()
    if killed_nats >= 0:
        await asyncio.to_thread(natsd.restart, killed_nats)
        await asyncio.sleep(5.0)  # the node catches up before the next run


def summary(kind: str, outcomes: list[Outcome]) -> dict[str, Any]:
    times = sorted(t for o in outcomes for t in o.unavailable_s)
    return {
        "kind": kind,
        "runs": len(outcomes),
        "p50": times[len(times) // 2] if times else float("nan"),
        "max": max(times, default=float("nan")),
        "hung": sum(o.hung for o in outcomes),
        "stalled": sum(o.stalled for o in outcomes),
        "gave_up": sum(o.gave_up for o in outcomes),
        "acknowledged": sum(o.acknowledged for o in outcomes),
    }
