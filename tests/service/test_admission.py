"""Issue 22 point 5: while the event loop runs late, bulk requests are shed with
RESOURCE_EXHAUSTED and RetryInfo; small requests go on; bulk is admitted again once the
loop has caught up. The lag is made by blocking the (shared, in-process) loop."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest
from purgatory_client import AsyncPurgatoryClient, OperationSpec
from purgatory_client.errors import ResourceExhaustedError

from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG


def _block_loop(seconds: float) -> None:
    time.sleep(seconds)  # deliberately: the loop runs late by this much


async def test_bulk_is_shed_while_the_loop_runs_late(serve: ServeFn) -> None:
    config = replace(TEST_CONFIG, shed_lag_ms=100, shed_batch_entries=10)
    _, port = await serve(config)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        bulk = [OperationSpec((f"k{i}",), 60_000) for i in range(10)]
        small = bulk[:9]
        await client.batch_try_complete_else_watch(bulk)  # on time: admitted
        asyncio.get_running_loop().call_soon(_block_loop, 0.5)
        await asyncio.sleep(0)
        with pytest.raises(ResourceExhaustedError) as info:
            await client.batch_check_and_complete([s.keys[0] for s in bulk])
        assert "event loop runs" in info.value.details
        delay = info.value.retry_delay
        assert delay is not None and delay >= 0.1
        # Small requests are never shed.
        result = await client.batch_check_and_complete([s.keys[0] for s in small])
        assert result.completed == 9
        assert await client.check_and_complete("k9") == 1
        # Once the loop has caught up, bulk is admitted again.
        deadline = time.monotonic() + 10
        while True:
            try:
                await client.batch_try_complete_else_watch(bulk)
                break
            except ResourceExhaustedError:
                assert time.monotonic() < deadline, "bulk never admitted again"
                await asyncio.sleep(0.05)


async def test_shedding_is_off_by_default(serve: ServeFn) -> None:
    _, port = await serve(TEST_CONFIG)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        bulk = [OperationSpec((f"k{i}",), 60_000) for i in range(20)]
        asyncio.get_running_loop().call_soon(_block_loop, 0.5)
        await asyncio.sleep(0)
        assert len(await client.batch_try_complete_else_watch(bulk)) == 20
