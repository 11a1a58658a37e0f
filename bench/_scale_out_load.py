"""The scale-out benchmark's clients around a takeover: registrations until a kill, the
first registration a new owner accepts, and the acknowledged registrations it lacks (its
pairs/s load is ``bench._pairs``, shared with the durable benchmark).

Every call goes over raw stubs (no client library), so what is measured is the servers and
the replication, not a client's retries: a failed call fails the measurement, except where
a kill is the point (:func:`load_until_killed` stops at the first error).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._pairs import resend_unavailable
from harness import ServerProcess

__all__ = ["first_success", "load_until_killed", "lost", "wait_serving"]


async def serves(address: str, name: str) -> bool:
    """Whether ``address`` accepts a registration on ``name`` now (a replicated purgatory:
    its lease is held), the state a measurement needs, not only an answer to a read."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            await stub.TryCompleteElseWatch(
                pb.TryCompleteElseWatchRequest(purgatory=name, keys=["serves"], timeout_ms=1),
                timeout=1,
            )
            return True
        except grpc.aio.AioRpcError:
            return False


async def wait_serving(address: str, name: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not await serves(address, name):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{address} does not serve {name}")
        await asyncio.sleep(0.05)


async def load_until_killed(
    address: str, name: str, acked: set[str], tag: str, duration: float
) -> None:
    channel = grpc.aio.insecure_channel(address)
    stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    stop_at = time.monotonic() + duration

    async def worker(i: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            op_id = f"{tag}-{i}-{n}"
            try:
                await stub.TryCompleteElseWatch(
                    pb.TryCompleteElseWatchRequest(
                        purgatory=name, operation_id=op_id, keys=["k"], timeout_ms=600_000
                    ),
                    timeout=10,
                )
            except grpc.aio.AioRpcError:
                return
            acked.add(op_id)

    try:
        await asyncio.gather(*(worker(i) for i in range(8)))
    finally:
        await channel.close()


async def first_success(servers: list[ServerProcess], name: str, timeout_s: float) -> ServerProcess:
    deadline = time.monotonic() + timeout_s
    n = 0
    while time.monotonic() < deadline:
        for server in servers:
            if not server.port and server.port_file.exists():
                server.wait_port()  # a replacement just started: its port, at once
            if not server.running or not server.port:
                continue
            n += 1
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
                try:
                    await stub.TryCompleteElseWatch(
                        pb.TryCompleteElseWatchRequest(
                            purgatory=name, operation_id=f"probe-{n}", timeout_ms=600_000
                        ),
                        timeout=2,
                    )
                    return server
                except grpc.aio.AioRpcError:
                    pass
        await asyncio.sleep(0.01)
    raise TimeoutError("no new owner")


async def lost(address: str, name: str, acked: set[str]) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        lost = 0
        for op_id in sorted(acked):
            try:  # UNAVAILABLE: the new owner's lease renewed late under load; re-sent
                await resend_unavailable(
                    stub.GetOperation,
                    pb.GetOperationRequest(purgatory=name, operation_id=op_id),
                    timeout=10,
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                lost += 1
        return lost
