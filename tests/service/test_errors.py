"""Every error code of the contract, and every configured limit, over real sockets."""

from __future__ import annotations

import asyncio

import pytest
from purgatory_client import (
    AlreadyExistsError,
    AsyncPurgatoryClient,
    Condition,
    InvalidArgumentError,
    NotFoundError,
    OperationSpec,
    ResourceExhaustedError,
    Signal,
    UnavailableError,
)

from tests.service.helpers import config_with, until_subscribers


async def test_unknown_purgatory_is_not_found(client: AsyncPurgatoryClient) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        await client.try_complete_else_watch(["k"], 1000, purgatory="nope")
    with pytest.raises(NotFoundError):
        await client.check_and_complete("k", purgatory="nope")
    with pytest.raises(NotFoundError):
        await client.get_purgatory("nope")
    with pytest.raises(NotFoundError):
        await client.delete_purgatory("nope")
    with pytest.raises(NotFoundError, match="missing-op"):
        await client.force_complete("missing-op")
    with pytest.raises(NotFoundError):
        await client.get_operation("missing-op")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"keys": ["a", ""]}, "keys[1]"),
        ({"keys": ["a", "a"]}, "keys[1]"),
        ({"keys": [], "condition": Condition.all_keys()}, "condition"),
        ({"condition": Condition.min_signals(0)}, "condition.min_signals.count"),
        ({"condition": Condition.values_at_least({"zz": 1})}, "condition.values_at_least.targets"),
    ],
)
async def test_bad_arguments_are_invalid_argument_naming_the_field(
    client: AsyncPurgatoryClient, kwargs: dict[str, object], field: str
) -> None:
    args: dict[str, object] = {"keys": ["a"], "timeout_ms": 1000, **kwargs}
    with pytest.raises(InvalidArgumentError) as info:
        await client.try_complete_else_watch(**args)  # type: ignore[arg-type]
    assert info.value.details.startswith(f"{field}:")


async def test_other_invalid_arguments(client: AsyncPurgatoryClient) -> None:
    with pytest.raises(InvalidArgumentError, match=": key:"):
        await client.check_and_complete("")
    with pytest.raises(InvalidArgumentError, match=r": signals\[1\]\.key:"):
        await client.batch_check_and_complete(["ok", ""])
    with pytest.raises(InvalidArgumentError, match=": operations:"):
        await client.batch_try_complete_else_watch([])
    with pytest.raises(InvalidArgumentError, match=": operation_id:"):
        await client.force_complete("")
    with pytest.raises(InvalidArgumentError, match=": name:"):
        await client.create_purgatory("bad name!")
    with pytest.raises(InvalidArgumentError, match=": purgatory:"):
        await client.check_and_complete("k", purgatory="")


async def test_existing_purgatory_is_already_exists(client: AsyncPurgatoryClient) -> None:
    with pytest.raises(AlreadyExistsError):
        await client.create_purgatory("default")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"keys": [f"k{i}" for i in range(9)]}, "keys"),  # max_keys_per_operation=8
        ({"keys": ["x" * 33]}, "keys[0]"),  # max_key_length=32
        ({"operation_id": "i" * 41}, "operation_id"),  # max_operation_id_length=40
        ({"payload": b"p" * 65}, "payload"),  # max_payload_bytes=64
        ({"timeout_ms": 4}, "timeout_ms"),  # min_timeout_ms=5
        ({"timeout_ms": 600_001}, "timeout_ms"),  # max_timeout_ms=600000
        (
            {"condition": Condition.min_signals(9, distinct_sources=True)},
            "condition.min_signals.count",
        ),
    ],
)
async def test_request_limits_are_invalid_argument_naming_the_field(
    client: AsyncPurgatoryClient, kwargs: dict[str, object], field: str
) -> None:
    # A request over a fixed limit is invalid whatever the load (retrying a
    # RESOURCE_EXHAUSTED would never succeed).
    args: dict[str, object] = {"keys": ["a"], "timeout_ms": 1000, **kwargs}
    with pytest.raises(InvalidArgumentError) as info:
        await client.try_complete_else_watch(**args)  # type: ignore[arg-type]
    assert info.value.details.startswith(f"{field}:")


async def test_signal_limits(client: AsyncPurgatoryClient) -> None:
    with pytest.raises(InvalidArgumentError, match=r": signal\.data:"):
        await client.check_and_complete("k", Signal(data=b"d" * 17))  # max_signal_data_bytes=16
    with pytest.raises(InvalidArgumentError, match=r": key:"):
        await client.check_and_complete("k" * 33)


async def test_pending_operations_limit(client: AsyncPurgatoryClient) -> None:
    specs = [OperationSpec((f"k{i}",), 60_000) for i in range(50)]  # max_pending=50
    await client.batch_try_complete_else_watch(specs)
    with pytest.raises(ResourceExhaustedError, match="max_pending"):
        await client.try_complete_else_watch(["one-more"], 60_000)
    await client.check_and_complete("k0")
    await client.try_complete_else_watch(["fits-again"], 60_000)


async def test_batch_size_limit(serve) -> None:  # type: ignore[no-untyped-def]
    _, port = await serve(config_with(max_batch_size=3))
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}") as client:
        with pytest.raises(InvalidArgumentError, match=": operations:"):
            await client.batch_try_complete_else_watch([OperationSpec((), 1000)] * 4)
        with pytest.raises(InvalidArgumentError, match=": signals:"):
            await client.batch_check_and_complete(["a", "b", "c", "d"])


async def test_subscriber_limit(client: AsyncPurgatoryClient) -> None:
    streams = [client.subscribe() for _ in range(3)]  # max_subscribers=3
    readers = [asyncio.create_task(s.__anext__()) for s in streams]
    await until_subscribers(client, 3)
    with pytest.raises(ResourceExhaustedError, match="max_subscribers"):
        await client.subscribe().__anext__()
    for reader in readers:
        reader.cancel()
    await asyncio.gather(*readers, return_exceptions=True)


async def test_purgatory_count_limit(client: AsyncPurgatoryClient) -> None:
    for i in range(7):  # max_purgatories=8, `default` is one
        await client.create_purgatory(f"p{i}")
    with pytest.raises(ResourceExhaustedError, match="max_purgatories"):
        await client.create_purgatory("p-too-many")


async def test_shutting_down_is_unavailable(server, client: AsyncPurgatoryClient) -> None:  # type: ignore[no-untyped-def]
    server.registry.begin_shutdown()
    with pytest.raises(UnavailableError, match="shutting down"):
        await client.try_complete_else_watch(["k"], 1000)
    with pytest.raises(UnavailableError):
        await client.list_purgatories()
