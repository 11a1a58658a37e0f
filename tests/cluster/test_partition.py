"""An owner cut off from NATS never answers a stale read (docs/scale-out.md §4).

Server A owns purgatory ``cutoff`` and reaches NATS only through :class:`Blackhole`
proxies; B stands by with direct connections. Operation X waits at A. The proxies are cut
(silently: nothing is closed), so A can no longer renew its lease; B takes over, and its
first write completes X. A is asked ``GetOperation(X)`` every few milliseconds all along:
after B acknowledged that write, no answer of A may say X is still waiting (the old
server answered WATCHING for ~0.5 s: reads were not checked against the lease). A's
refusals are UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._cluster.natsd import LocalNatsCluster

from harness.tcp_proxy import Blackhole
from tests.cluster.servers import LEASE_MS, ReplicatedServer, by_rank, stub, wait_owner

NAME = "cutoff"
WATCHING = pb.OperationState.Name(pb.OPERATION_STATE_WATCHING)


async def test_owner_cut_off_from_nats_answers_no_stale_read(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    proxies = [await Blackhole("127.0.0.1", node.port).start() for node in nats_cluster.nodes]
    first, second = by_rank(NAME, 2)
    a = ReplicatedServer(tmp_path, "a", [p.url for p in proxies], NAME, first)
    await asyncio.to_thread(a.wait_port)  # the proxies run on this loop meanwhile
    assert await wait_owner([a], NAME, 30) == 0
    b = ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, second)
    await asyncio.to_thread(b.wait_port)
    channel_a, client_a = stub(a.address)
    channel_b, client_b = stub(b.address)
    # (started, ended, state name or status code name) of every read at A
    reads: list[tuple[float, float, str]] = []
    stop = asyncio.Event()

    async def read_at_a() -> None:
        request = pb.GetOperationRequest(purgatory=NAME, operation_id="x")
        while not stop.is_set():
            started = time.monotonic()
            try:
                answer = await client_a.GetOperation(request, timeout=1.0)
                seen = pb.OperationState.Name(answer.operation.state)
            except grpc.aio.AioRpcError as exc:
                seen = exc.code().name
            reads.append((started, time.monotonic(), seen))
            await asyncio.sleep(0.005)

    await client_a.TryCompleteElseWatch(
        pb.TryCompleteElseWatchRequest(
            purgatory=NAME, operation_id="x", keys=["kx"], timeout_ms=60_000
        )
    )
    reader = asyncio.ensure_future(read_at_a())
    try:
        await asyncio.sleep(0.3)
        for proxy in proxies:
            proxy.cut()
        cut = time.monotonic()
        await wait_owner([b], NAME, 30)
        done = await client_b.CheckAndComplete(
            pb.CheckAndCompleteRequest(purgatory=NAME, key="kx"), timeout=10
        )
        written = time.monotonic()  # B's first write is acknowledged
        assert done.completed == 1
        await asyncio.sleep(LEASE_MS / 1000 + 1.0)
    finally:
        stop.set()
        await asyncio.gather(reader, return_exceptions=True)
        for proxy in proxies:
            proxy.heal()
        await channel_a.close()
        await channel_b.close()
        a.kill()
        b.stop()
        for proxy in proxies:
            await proxy.close()
    before = [seen for started, _, seen in reads if started < cut]
    assert before and set(before) == {WATCHING}, before
    stale = [round(s - written, 3) for s, _, seen in reads if s >= written and seen == WATCHING]
    assert not stale, f"A answered stale reads after B's first write: {stale[:5]}"
    assert {seen for s, _, seen in reads if s >= written} == {"UNAVAILABLE"}
