"""Standby takeover under load: kill -9 the owner, a standby takes over, nothing acked is lost.

Two purgatory servers replicate purgatory ``d`` to the session's NATS cluster. Each
cycle runs the durable crash test's load (watches with every condition kind and mixed
timeouts, signals, force-completes, a resuming subscriber; tests/durability/crash_load.py)
against whichever server owns ``d``, kills that server with SIGKILL at a random moment and
starts a fresh server in its place (the next standby). The other server must take over
within a bounded time, and the new owner must pass the crash test's checks
(:func:`tests.durability.test_crash.verify`): a gap-free sequence equal to what
subscribers saw, every reported outcome unchanged, every acknowledged watch pending with
its acknowledged progress or with exactly one outcome, overdue operations expired at once.
The owners write snapshots every 100 messages or so, so the standbys that start in place
of the killed servers replay a snapshot and its tail, and some kills interrupt one.

``PURGATORY_TAKEOVER_CYCLES`` sets the number of kills (default 3).
"""

from __future__ import annotations

import logging
import os
import random
import time
from pathlib import Path

import grpc
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import LEASE_MS, ReplicatedServer, by_rank, stub, wait_owner
from tests.durability.crash_load import NAME, Acks, now_ms, run_load
from tests.durability.test_crash import verify

logger = logging.getLogger(__name__)
CYCLES = int(os.environ.get("PURGATORY_TAKEOVER_CYCLES", "3"))
# Snapshots often, so kills land before, during and after them (docs/scale-out.md §5).
SNAPSHOTS = "snapshot_messages = 100\n"
TAKEOVER_BOUND_S = 20.0  # lease 1.5 s + catch-up, on a loaded shared 2-core machine


async def test_owner_killed_under_load_standby_takes_over(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    seed = int(os.environ.get("PURGATORY_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    acks = Acks()
    started = 0
    # Each fresh server ranks below every earlier one, so placement never moves the
    # purgatory to a newcomer: only the kills do.
    ids = by_rank(NAME, 2 + CYCLES)

    def fresh() -> ReplicatedServer:
        nonlocal started
        started += 1
        server = ReplicatedServer(
            tmp_path,
            f"s{started}",
            nats_cluster.urls,
            NAME,
            ids[started - 1],
            cluster_extra=SNAPSHOTS,
        )
        server.wait_port()
        return server

    servers: list[ReplicatedServer] = []
    takeovers: list[float] = []
    try:
        servers.extend((fresh(), fresh()))
        for cycle in range(CYCLES):
            owner = await wait_owner(servers, NAME, TAKEOVER_BOUND_S)
            victim = servers[owner]
            killed_ms = await run_load(victim.port, acks, rng, cycle, victim)
            killed = time.monotonic()
            assert acks.watches or acks.outcomes, f"seed {seed}: no load was acknowledged"
            servers[owner] = fresh()  # the next standby; either server may take over
            survivor = servers[await wait_owner(servers, NAME, TAKEOVER_BOUND_S)]
            takeovers.append(time.monotonic() - killed)
            ready_ms = now_ms()
            channel, client = stub(survivor.address)
            try:
                await verify(client, acks, killed_ms, ready_ms)
            except (AssertionError, grpc.aio.AioRpcError) as exc:
                raise AssertionError(f"seed {seed}, cycle {cycle}: {exc}") from exc
            finally:
                await channel.close()
    finally:
        for server in servers:
            server.stop()
    # The lease must expire first. Its last renewal was about lease/3 before the kill (later
    # if the loaded owner renewed late), so a takeover takes well over 0.3 leases; one
    # within the standby's poll (lease/10) would mean it did not wait for the lease.
    assert min(takeovers) >= LEASE_MS / 1000 * 0.3, takeovers
    summary = ", ".join(f"{n} {what}" for what, n in sorted(acks.stats.items()))
    logger.info(
        "takeover test: seed %d, %d kills, takeover %s s, zero losses; %s",
        seed,
        CYCLES,
        [round(t, 2) for t in takeovers],
        summary,
    )
