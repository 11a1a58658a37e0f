"""Purgatory administration, health checking and server reflection."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from purgatory_client import AsyncPurgatoryClient, NotFoundError, OperationState, PurgatoryConfig

from tests.service.helpers import until_pending


async def test_create_get_list_delete(client: AsyncPurgatoryClient) -> None:
    created = await client.create_purgatory("orders", PurgatoryConfig(tick_ms=5, max_pending=7))
    assert created.name == "orders"
    assert created.config.tick_ms == 5
    assert created.config.max_pending == 7
    assert created.config.wheel_size == 20  # zero: the server default
    assert [p.name for p in await client.list_purgatories()] == ["default", "orders"]
    await client.try_complete_else_watch(["a"], 60_000, purgatory="orders")
    info = await client.get_purgatory("orders")
    assert (info.pending, info.watched_keys, info.last_sequence) == (1, 1, 0)


async def test_delete_cancels_pending_operations_and_answers_waiters(
    client: AsyncPurgatoryClient,
) -> None:
    await client.create_purgatory("tmp")
    waiter = asyncio.create_task(client.wait(["k"], 600_000, purgatory="tmp"))
    await until_pending(client, 1, "tmp")
    await client.try_complete_else_watch(["j"], 600_000, purgatory="tmp")
    assert await client.delete_purgatory("tmp") == 2
    status = await asyncio.wait_for(waiter, 5)
    assert status.state is OperationState.CANCELLED
    with pytest.raises(NotFoundError):
        await client.get_purgatory("tmp")
    # The name can be used again.
    assert (await client.create_purgatory("tmp")).last_sequence == 0


async def test_health_reports_serving(server) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "purgatory.v1.PurgatoryService"):
            resp = await stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert resp.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_the_service(server) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        call = stub.ServerReflectionInfo(iter([request]))
        names = set()
        async for resp in call:
            names = {s.name for s in resp.list_services_response.service}
            break
        call.cancel()
    assert "purgatory.v1.PurgatoryService" in names
    assert "grpc.health.v1.Health" in names
