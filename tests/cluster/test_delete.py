"""DeletePurgatory of a replicated purgatory sticks: tombstone, purge, NOT_FOUND everywhere.

A owns ``buried``, B stands by. The delete is sent to B (routed to A, the owner): its
pending operation ends CANCELLED, and before the RPC answers the tombstone is written and
the subject purged. Then both servers answer NOT_FOUND (B by itself, not only by routing
to A), CreatePurgatory answers FAILED_PRECONDITION, a kill -9 of A and its restart with
the name still in its configuration do not bring it back (no takeover by B either), and
only an explicit revive lets the servers build a fresh, empty purgatory under a new
incarnation.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import nats
import pytest
from nats.js.errors import NotFoundError
from purgatory_client import AsyncPurgatoryClient
from purgatory_client.errors import FailedPreconditionError
from purgatory_client.errors import NotFoundError as PNotFound
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.layout import META_BUCKET, journal_stream, journal_subject
from purgatory_server._cluster.natsd import LocalNatsCluster
from purgatory_server._cluster.tombstone import revive, tombstone_key

from tests.cluster.servers import LEASE_MS, ReplicatedServer, by_rank, stub, wait_owner

NAME = "buried"
STREAMS = 2  # servers.config_text's journal_streams


async def _code(server: ReplicatedServer) -> grpc.StatusCode:
    """What ``server`` itself answers GetPurgatory with (no routing)."""
    channel, client = stub(server.address)
    try:
        await client.GetPurgatory(pb.GetPurgatoryRequest(name=NAME), timeout=2.0)
        return grpc.StatusCode.OK
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    finally:
        await channel.close()


async def _until_code(server: ReplicatedServer, code: grpc.StatusCode, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (got := await _code(server)) != code:
        assert time.monotonic() < deadline, f"{server.label} answers {got}, not {code}"
        await asyncio.sleep(0.05)


async def test_a_deleted_replicated_purgatory_stays_deleted(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    # A ranks first, B second, A's replacement last: only the test moves the purgatory.
    ids = by_rank(NAME, 3)
    a = ReplicatedServer(tmp_path, "a", nats_cluster.urls, NAME, ids[0])
    a.wait_port()
    assert await wait_owner([a], NAME, 30) == 0
    b = ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, ids[1])
    b.wait_port()
    a2: ReplicatedServer | None = None
    client = AsyncPurgatoryClient(b.address, purgatory=NAME, timeout=10)
    nc = await nats.connect(servers=nats_cluster.urls)
    js = nc.jetstream(timeout=5)
    try:
        await client.try_complete_else_watch(["k"], 60_000, operation_id="pending")
        old = (await client.get_purgatory()).incarnation
        assert await client.delete_purgatory(NAME) == 1  # routed to A; its op cancelled

        # Written before the answer: the tombstone; the subject's history is purged.
        kv = await js.key_value(META_BUCKET)
        assert (await kv.get(tombstone_key(NAME))).value
        with pytest.raises(NotFoundError):
            await js.get_last_msg(journal_stream(NAME, STREAMS), journal_subject(NAME, STREAMS))
        assert await _code(a) == grpc.StatusCode.NOT_FOUND
        await _until_code(b, grpc.StatusCode.NOT_FOUND, 5)
        with pytest.raises(PNotFound):
            await client.get_purgatory()
        with pytest.raises(FailedPreconditionError, match="stays deleted"):
            await client.create_purgatory(NAME)

        # Neither a kill of the former owner nor its restart brings it back.
        a.kill()
        await asyncio.sleep(2.5 * LEASE_MS / 1000)  # past any lease: B would take over
        assert await _code(b) == grpc.StatusCode.NOT_FOUND
        a2 = ReplicatedServer(tmp_path, "a2", nats_cluster.urls, NAME, ids[2])
        a2.wait_port()
        assert await _code(a2) == grpc.StatusCode.NOT_FOUND
        await asyncio.sleep(LEASE_MS / 1000)
        assert await _code(a2) == grpc.StatusCode.NOT_FOUND
        assert await _code(b) == grpc.StatusCode.NOT_FOUND

        # An operator's revive: a fresh, empty purgatory with a new incarnation.
        assert await revive(nats_cluster.urls, NAME)
        owner = [b, a2][await wait_owner([b, a2], NAME, 30)]
        async with AsyncPurgatoryClient(owner.address, purgatory=NAME, timeout=10) as fresh:
            info = await fresh.get_purgatory()
            assert info.pending == 0 and info.last_sequence == 0
            assert info.incarnation != old
    finally:
        await nc.close()
        await client.close()
        for server in (a, b, a2):
            if server is not None:
                server.stop()
