"""Operation ids: unique per purgatory, idempotent re-sends, ALREADY_EXISTS on conflict."""

from __future__ import annotations

import asyncio

import pytest
from purgatory_client import (
    AlreadyExistsError,
    AsyncPurgatoryClient,
    Condition,
    InvalidArgumentError,
    OperationSpec,
    OperationState,
)


async def test_resend_of_a_watching_operation_returns_its_state(
    client: AsyncPurgatoryClient,
) -> None:
    first = await client.try_complete_else_watch(["k"], 60_000, operation_id="op", payload=b"p")
    again = await client.try_complete_else_watch(["k"], 60_000, operation_id="op", payload=b"p")
    assert first.created and not again.created
    assert again.state is OperationState.WATCHING
    assert again.create_time_ms == first.create_time_ms
    assert (await client.get_purgatory()).pending == 1
    # One signal completes it once, however many times it was sent.
    assert await client.check_and_complete("k") == 1


@pytest.mark.parametrize(
    "change",
    [
        {"keys": ["other"]},
        {"timeout_ms": 1234},
        {"payload": b"different"},
        {"condition": Condition.all_keys()},
    ],
)
async def test_resend_with_a_different_definition_is_already_exists(
    client: AsyncPurgatoryClient, change: dict[str, object]
) -> None:
    base: dict[str, object] = {"keys": ["k"], "timeout_ms": 60_000, "payload": b""}
    await client.try_complete_else_watch(operation_id="op", **base)  # type: ignore[arg-type]
    with pytest.raises(AlreadyExistsError, match="op"):
        await client.try_complete_else_watch(operation_id="op", **{**base, **change})  # type: ignore[arg-type]


async def test_resend_of_a_finished_operation_returns_its_outcome(
    client: AsyncPurgatoryClient,
) -> None:
    await client.try_complete_else_watch(["k"], 60_000, operation_id="done")
    await client.check_and_complete("k")
    # A retried long-poll (e.g. after a dropped connection) gets the outcome at once.
    status = await asyncio.wait_for(client.wait(["k"], 60_000, operation_id="done"), 5)
    assert status.state is OperationState.COMPLETED
    assert status.created is False
    assert status.sequence == 1
    assert (await client.get_purgatory()).pending == 0


async def test_server_assigns_distinct_ids(client: AsyncPurgatoryClient) -> None:
    ids = {(await client.try_complete_else_watch(["k"], 60_000)).operation_id for _ in range(5)}
    assert len(ids) == 5
    assert all(ids)


async def test_batch_is_idempotent_and_all_or_nothing(client: AsyncPurgatoryClient) -> None:
    specs = [OperationSpec(("a",), 60_000, operation_id="b1"), OperationSpec(("b",), 60_000)]
    first = await client.batch_try_complete_else_watch(specs)
    assert [s.created for s in first] == [True, True]
    again = await client.batch_try_complete_else_watch(specs[:1])
    assert again[0].created is False
    conflicting = [
        OperationSpec(("c",), 60_000, operation_id="fresh"),
        OperationSpec(("zzz",), 60_000, operation_id="b1"),
    ]
    with pytest.raises(AlreadyExistsError, match=r"operations\[1\]\.operation_id"):
        await client.batch_try_complete_else_watch(conflicting)
    with pytest.raises(InvalidArgumentError, match=r"operations\[1\]\.operation_id"):
        await client.batch_try_complete_else_watch(
            [OperationSpec(("c",), 60_000, operation_id="x")] * 2
        )
    # Nothing of the failed batches was registered.
    assert (await client.get_purgatory()).pending == 2
