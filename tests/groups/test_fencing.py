"""Fencing on a real server: ``delivery_attempt`` strictly increases over an outcome's
whole life, redrives included, so a consumer whose lease lapsed can never ack or extend
the delivery another member now holds (docs/service.md "Worker groups", fencing)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from purgatory_client import AsyncPurgatoryClient, FailedPreconditionError
from purgatory_client._async_groups import AsyncGroupStream
from purgatory_server._service import Limits, ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.service.helpers import TEST_DATA_DIR, until

VIS = 150  # ms: each delivery is left to lapse on purpose
CONFIG = ServerConfig(
    listen="127.0.0.1:0",
    data_dir=TEST_DATA_DIR,  # never the checkout's ./data
    grace_s=0.5,
    limits=Limits(max_groups=2, max_group_backlog=50),
    purgatories=(PurgatorySettings(name="orders", retained_events=100),),
)


@pytest.fixture
async def client() -> AsyncIterator[AsyncPurgatoryClient]:
    server, port = await create_server("127.0.0.1:0", CONFIG)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory="orders", timeout=10) as c:
            yield c
    finally:
        await server.stop(0.5)


async def _lapse_to_dead_letter(client: AsyncPurgatoryClient) -> None:
    async def dead() -> bool:
        return bool((await client.list_dead_letters("billing")).dead_letters)

    await until(dead, timeout_s=10)


async def _next(stream: AsyncGroupStream) -> tuple[int, int]:
    d = await asyncio.wait_for(stream.__anext__(), 10)
    return d.sequence, d.attempt


async def test_redrive_continues_the_attempt_numbers_and_fences_stale_consumers(
    client: AsyncPurgatoryClient,
) -> None:
    stream = await client.join_group("billing", visibility_timeout_ms=VIS, max_attempts=1)
    try:
        await client.try_complete_else_watch([], 10, operation_id="order-1")
        seq, first = await _next(stream)
        assert first == 1
        await _lapse_to_dead_letter(client)  # one delivery allowed: now a dead letter
        (dead,) = (await client.list_dead_letters("billing")).dead_letters
        assert dead.attempt == 1
        assert await client.redrive("billing") == [seq]
        again, second = await _next(stream)
        # Not attempt 1 again: the lapsed lease's number is never reused.
        assert (again, second) == (seq, 2)
        with pytest.raises(FailedPreconditionError):
            await client.ack("billing", seq, attempt=first)
        with pytest.raises(FailedPreconditionError):
            await client.extend_lease("billing", seq, first)
        # The redrive gave a fresh budget (max_attempts 1): the second delivery lapses
        # into a dead letter again, and a second redrive goes on counting.
        await _lapse_to_dead_letter(client)
        assert await client.redrive("billing") == [seq]
        assert await _next(stream) == (seq, 3)
        for stale in (first, second):
            with pytest.raises(FailedPreconditionError):
                await client.ack("billing", seq, attempt=stale)
        await client.ack("billing", seq, attempt=3)
        assert (await client.list_dead_letters("billing")).dead_letters == ()
    finally:
        await stream.aclose()
