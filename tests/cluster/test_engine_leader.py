"""Killing the JetStream leader of a replicated purgatory's stream under load loses nothing.

A cluster of its own (three nats-server nodes, so the shared one stays healthy), two
purgatory servers replicating ``led``. Clients register operations with ids while the
stream's leader node is SIGKILLed; appends stall until a new leader is elected (4-9 s on
JetStream), and the owner re-sends them with the same message id, or gives the purgatory
up and a standby rebuilds it. Afterwards every acknowledged registration must be found at
whichever server owns the purgatory, exactly once in its history.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import nats
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.layout import journal_stream
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import ReplicatedServer, by_rank, stub, wait_owner

NAME = "led"


async def _leader(urls: list[str]) -> str:
    nc = await nats.connect(servers=urls)
    try:
        info = await nc.jetstream().stream_info(journal_stream(NAME, 2))
        assert info.cluster is not None and info.cluster.leader
        return str(info.cluster.leader)
    finally:
        await nc.close()


async def _register(servers: list[ReplicatedServer], acked: set[str], stop_at: float) -> None:
    n = 0
    while time.monotonic() < stop_at:
        for server in servers:
            if not server.running:
                continue
            channel, client = stub(server.address)
            try:
                while time.monotonic() < stop_at:
                    n += 1
                    op_id = f"op{n}"
                    await client.TryCompleteElseWatch(
                        pb.TryCompleteElseWatchRequest(
                            purgatory=NAME, operation_id=op_id, keys=["k"], timeout_ms=600_000
                        ),
                        timeout=25,
                    )
                    acked.add(op_id)
            except grpc.aio.AioRpcError:
                pass  # not the owner, or it gave the purgatory up: try the other
            finally:
                await channel.close()
        await asyncio.sleep(0.05)


async def test_stream_leader_killed_under_load(tmp_path: Path) -> None:
    cluster = LocalNatsCluster(tmp_path / "nats").start()
    servers: list[ReplicatedServer] = []
    try:
        # A ranks first and starts first, so placement moves nothing during the test.
        for label, server_id in zip(("a", "b"), by_rank(NAME, 2), strict=True):
            servers.append(ReplicatedServer(tmp_path, label, cluster.urls, NAME, server_id))
            servers[-1].wait_port(60)
        await wait_owner(servers, NAME, 60)
        acked: set[str] = set()
        load = asyncio.ensure_future(_register(servers, acked, time.monotonic() + 14))
        await asyncio.sleep(1.0)
        before = len(acked)
        leader = await _leader(cluster.urls)
        cluster.kill(int(leader[1:]) - 1)
        await load
        assert before > 0 and len(acked) > before, (before, len(acked))
        # Placement may hand the purgatory back to A (it ranks first) once the new leader
        # settles, so the checks follow the owner instead of holding one server's stub.
        pending = sorted(acked)
        deadline = time.monotonic() + 60
        while pending:
            owner = servers[await wait_owner(servers, NAME, 30)]
            channel, client = stub(owner.address)
            try:
                while pending:
                    status = await client.GetOperation(
                        pb.GetOperationRequest(purgatory=NAME, operation_id=pending[-1]),
                        timeout=10,
                    )
                    assert status.operation.state == pb.OperationState.Value(
                        "OPERATION_STATE_WATCHING"
                    ), (pending[-1], status)
                    pending.pop()
                info = (await client.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
                assert info.pending >= len(acked)  # plus any whose answer the kill cut off
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                pending = pending or sorted(acked)[-1:]  # GetPurgatory again at the new owner
            finally:
                await channel.close()
    finally:
        for server in servers:
            server.stop()
        cluster.stop()
