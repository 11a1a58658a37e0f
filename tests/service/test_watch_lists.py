"""No completed operation stays referenced by a watch list (the service's view).

Kafka drops a completed operation from a key's list only when that key is checked or a
purge runs; with two keys per operation and only the first ever signalled, the second
key's list would hold every completed operation until `purge_interval` of them piled up.
"""

from __future__ import annotations

import asyncio
import time

from purgatory_client import AsyncPurgatoryClient, OperationSpec, OperationState, PurgatoryConfig


async def test_operations_completed_through_one_key_leave_the_other(
    client: AsyncPurgatoryClient,
) -> None:
    specs = [
        OperationSpec(keys=(f"first-{i}", f"second-{i}"), timeout_ms=60_000, operation_id=f"op-{i}")
        for i in range(500)
    ]
    await client.create_purgatory("lists", PurgatoryConfig(max_pending=1000))
    await client.batch_try_complete_else_watch(specs, purgatory="lists")
    info = await client.get_purgatory("lists")
    assert info.pending == 500 and info.watched_keys == 1000
    result = await client.batch_check_and_complete(
        [f"first-{i}" for i in range(500)], purgatory="lists"
    )
    assert result.completed == 500
    deadline = time.monotonic() + 1.0
    while True:
        info = await client.get_purgatory("lists")
        if info.watched_keys == 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    assert info.pending == 0
    assert info.watched_keys == 0, f"{info.watched_keys} keys still listed after 1 s"
    assert (
        await client.get_operation("op-499", purgatory="lists")
    ).state is OperationState.COMPLETED
