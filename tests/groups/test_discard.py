"""DiscardDeadLetters on a real server: a discarded dead letter is gone from the group
and never delivered again, in memory and across a restart of a durable purgatory; the
request's errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from purgatory_client import AsyncPurgatoryClient, InvalidArgumentError, NotFoundError
from purgatory_server._service import PurgatoryServer, ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.durability.helpers import NAME, durable_config


def _in_memory(data_dir: Path) -> ServerConfig:
    return ServerConfig(
        listen="127.0.0.1:0",
        data_dir=str(data_dir),
        grace_s=0.5,
        purgatories=(PurgatorySettings(name=NAME, retained_events=1000),),
    )


async def _until_dead(client: AsyncPurgatoryClient, count: int) -> list[int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        page = await client.list_dead_letters("billing")
        if len(page.dead_letters) == count:
            return [d.sequence for d in page.dead_letters]
        assert loop.time() < deadline, page
        await asyncio.sleep(0.02)


async def _two_dead_letters(client: AsyncPurgatoryClient) -> list[int]:
    """poison-1 and poison-2, each delivered once (max_attempts 1) and never acked."""
    member = await client.join_group("billing", visibility_timeout_ms=50, max_attempts=1)
    for op_id in ("poison-1", "poison-2"):
        await client.try_complete_else_watch([], 5, operation_id=op_id)
    seen = {(await asyncio.wait_for(anext(member), 10)).operation_id for _ in range(2)}
    assert seen == {"poison-1", "poison-2"}
    await member.aclose()
    return await _until_dead(client, 2)


async def _only_new_outcomes_are_delivered(client: AsyncPurgatoryClient) -> None:
    await client.try_complete_else_watch([], 5, operation_id="fresh")
    member = await client.join_group("billing")
    try:
        delivery = await asyncio.wait_for(anext(member), 10)
        assert (delivery.operation_id, delivery.attempt) == ("fresh", 1)
        await delivery.ack()
    finally:
        await member.aclose()
    (group,) = await client.list_groups()
    assert (group.ready, group.leased, group.dead_letters) == (0, 0, 0)


async def _serve(config: ServerConfig) -> tuple[PurgatoryServer, str]:
    server, port = await create_server("127.0.0.1:0", config)
    return server, f"127.0.0.1:{port}"


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "durable"])
async def test_a_discarded_dead_letter_is_gone_and_never_delivered(
    tmp_path: Path, durable: bool
) -> None:
    config = durable_config(tmp_path) if durable else _in_memory(tmp_path)
    server, target = await _serve(config)
    try:
        async with AsyncPurgatoryClient(target, purgatory=NAME, timeout=10) as client:
            first, second = await _two_dead_letters(client)
            # Named: only dead letters count, each once; unknown sequences are skipped.
            assert await client.discard_dead_letters("billing", [first, first, 999]) == [first]
            assert await _until_dead(client, 1) == [second]
            # All of them: the rest; then nothing is left to discard.
            assert await client.discard_dead_letters("billing") == [second]
            assert await client.discard_dead_letters("billing") == []
            if not durable:
                await _only_new_outcomes_are_delivered(client)
                return
        await server.stop(0.5)
        server, target = await _serve(config)
        async with AsyncPurgatoryClient(target, purgatory=NAME, timeout=10) as client:
            # The discards were journaled: after the restart they are still gone.
            assert (await client.list_dead_letters("billing")).dead_letters == ()
            await _only_new_outcomes_are_delivered(client)
    finally:
        await server.stop(0.5)


async def test_discard_errors(tmp_path: Path) -> None:
    server, target = await _serve(durable_config(tmp_path))
    try:
        async with AsyncPurgatoryClient(target, purgatory=NAME, timeout=10) as client:
            with pytest.raises(NotFoundError) as unknown:
                await client.discard_dead_letters("nobody")
            assert unknown.value.resource_info == ("group", "nobody")
            # An empty list never means "all" (unlike Redrive): refused, naming the field.
            with pytest.raises(InvalidArgumentError) as empty:
                await client.discard_dead_letters("nobody", [])
            assert [f for f, _ in empty.value.field_violations] == ["sequences"]
            with pytest.raises(InvalidArgumentError) as bad_name:
                await client.discard_dead_letters("bad name!")
            assert [f for f, _ in bad_name.value.field_violations] == ["group"]
    finally:
        await server.stop(0.5)
