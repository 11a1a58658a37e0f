"""Killing the NATS node that leads the lease bucket moves no purgatory (docs/scale-out.md §9).

Its own three-node NATS cluster (the test kills a node). Server A owns ``steady``, B
stands by. The node leading ``KV_purgatory-owners`` is SIGKILLed: writes to the bucket
fail until the other two elect a leader (5.8-8.2 s measured on loopback), longer than the
1.5 s lease, so A's lease lapses and A stops serving. Once the bucket answers, A gets the
purgatory back (B waits a grace period after an outage it saw), with the operation that
was waiting, and B never serves it (the old servers moved it to B: every purgatory of
the cluster would have moved at once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import grpc
import nats
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.layout import LEASE_BUCKET
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import ReplicatedServer, by_rank, stub, wait_owner

NAME = "steady"


async def _leader(urls: list[str], stream: str) -> str:
    nc = await nats.connect(servers=urls)
    try:
        info = await nc.jetstream().stream_info(stream)
        assert info.cluster is not None and info.cluster.leader
        return str(info.cluster.leader)
    finally:
        await nc.close()


async def _serves(client: Any, timeout_s: float = 0.5) -> bool:
    try:
        await client.GetPurgatory(pb.GetPurgatoryRequest(name=NAME), timeout=timeout_s)
        return True
    except grpc.aio.AioRpcError:
        return False


async def test_lease_bucket_leader_loss_moves_nothing(tmp_path: Path) -> None:
    natsd = LocalNatsCluster(tmp_path / "nats").start()
    servers: list[ReplicatedServer] = []
    try:
        first, second = by_rank(NAME, 2)
        a = ReplicatedServer(tmp_path, "a", natsd.urls, NAME, first)
        servers.append(a)
        a.wait_port(60)
        assert await wait_owner([a], NAME, 60) == 0
        b = ReplicatedServer(tmp_path, "b", natsd.urls, NAME, second)
        servers.append(b)
        b.wait_port(60)
        channel_a, client_a = stub(a.address)
        channel_b, client_b = stub(b.address)
        try:
            await client_a.TryCompleteElseWatch(
                pb.TryCompleteElseWatchRequest(
                    purgatory=NAME, operation_id="x", keys=["kx"], timeout_ms=120_000
                )
            )
            leader = await _leader(natsd.urls, f"KV_{LEASE_BUCKET}")
            natsd.kill([n.name for n in natsd.nodes].index(leader))
            killed = time.monotonic()
            a_down = b_served = 0
            back = 0.0
            while (elapsed := time.monotonic() - killed) < 30:
                b_served += await _serves(client_b)
                if not await _serves(client_a):
                    a_down += 1
                elif a_down or elapsed > 12:  # back, or never away (a short election)
                    back = elapsed
                    break
                await asyncio.sleep(0.05)
            assert back, "A did not serve its purgatory again within 30 s"
            assert b_served == 0, "the standby took the purgatory over"
            logging.getLogger(__name__).info("A served again %.2fs after the kill", back)
            await asyncio.sleep(1.0)  # B's grace period is over: still A's
            assert not await _serves(client_b) and await _serves(client_a)
            op = await client_a.GetOperation(
                pb.GetOperationRequest(purgatory=NAME, operation_id="x"), timeout=5
            )
            assert op.operation.state == pb.OPERATION_STATE_WATCHING
            done = await client_a.CheckAndComplete(
                pb.CheckAndCompleteRequest(purgatory=NAME, key="kx"), timeout=10
            )
            assert done.completed == 1
        finally:
            await channel_a.close()
            await channel_b.close()
    finally:
        for server in servers:
            server.kill()
        natsd.stop()
