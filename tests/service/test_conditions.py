"""Each condition kind end to end, and what the final result reports."""

from __future__ import annotations

import asyncio

from purgatory_client import AsyncPurgatoryClient, Condition, OperationState, Signal

from tests.service.helpers import until_pending


async def _state(client: AsyncPurgatoryClient, op_id: str) -> OperationState:
    return (await client.get_operation(op_id)).state


async def test_any_key_is_the_default(client: AsyncPurgatoryClient) -> None:
    op = await client.try_complete_else_watch(["a", "b"], 60_000)
    assert await client.check_and_complete("b") == 1
    done = await client.get_operation(op.operation_id)
    assert done.state is OperationState.COMPLETED
    assert done.result.signalled_keys == ("b",)


async def test_all_keys_needs_every_key(client: AsyncPurgatoryClient) -> None:
    op = await client.try_complete_else_watch(
        ["p0", "p1", "p2"], 60_000, condition=Condition.all_keys(), operation_id="produce"
    )
    assert await client.check_and_complete("p0") == 0
    assert await client.check_and_complete("p0") == 0  # the same key twice is still one key
    assert await client.check_and_complete("p2") == 0
    assert await _state(client, "produce") is OperationState.WATCHING
    assert await client.check_and_complete("p1") == 1
    done = await client.get_operation(op.operation_id)
    assert done.state is OperationState.COMPLETED
    assert done.result.signalled_keys == ("p0", "p2", "p1")
    assert done.result.signal_count == 4


async def test_min_signals_counts_every_signal(client: AsyncPurgatoryClient) -> None:
    await client.try_complete_else_watch(
        ["k"], 60_000, condition=Condition.min_signals(3), operation_id="m"
    )
    for _ in range(2):
        assert await client.check_and_complete("k", Signal(source="r1")) == 0
    assert await client.check_and_complete("k", Signal(source="r1")) == 1
    done = await client.get_operation("m")
    assert done.result.signal_count == 3


async def test_min_signals_distinct_sources_counts_a_replica_once(
    client: AsyncPurgatoryClient,
) -> None:
    # DelayedProduce: acks from 3 replicas; a replica acking twice counts once.
    await client.try_complete_else_watch(
        ["t-0"], 60_000, condition=Condition.min_signals(3, distinct_sources=True), operation_id="p"
    )
    for source in ("r1", "r2", "r1", "r2"):
        assert await client.check_and_complete("t-0", Signal(source=source)) == 0
    assert await _state(client, "p") is OperationState.WATCHING
    assert await client.check_and_complete("t-0", Signal(source="r3")) == 1
    done = await client.get_operation("p")
    assert done.result.sources == ("r1", "r2", "r3")
    assert done.result.signal_count == 3


async def test_sum_at_least_across_keys(client: AsyncPurgatoryClient) -> None:
    # DelayedFetch: min bytes over the partitions fetched.
    await client.try_complete_else_watch(
        ["f-0", "f-1"], 60_000, condition=Condition.sum_at_least(10), operation_id="fetch"
    )
    assert await client.check_and_complete("f-0", Signal(amount=4)) == 0
    assert await client.check_and_complete("f-1", Signal(amount=5)) == 0
    assert await _state(client, "fetch") is OperationState.WATCHING
    assert await client.check_and_complete("f-1", Signal(amount=1)) == 1
    done = await client.get_operation("fetch")
    assert done.result.amount_sum == 10


async def test_values_at_least_counts_values_sent_before_registration(
    client: AsyncPurgatoryClient,
) -> None:
    assert await client.check_and_complete("isr-1", Signal(value=10)) == 0
    await client.try_complete_else_watch(
        ["isr-1", "isr-2"],
        60_000,
        condition=Condition.values_at_least({"isr-1": 10, "isr-2": 5}),
        operation_id="hw",
    )
    assert await _state(client, "hw") is OperationState.WATCHING
    assert await client.check_and_complete("isr-2", Signal(value=4)) == 0
    assert await client.check_and_complete("isr-2", Signal(value=5)) == 1
    done = await client.get_operation("hw")
    assert dict(done.result.values) == {"isr-1": 10, "isr-2": 5}


async def test_values_at_least_already_met_completes_at_registration(
    client: AsyncPurgatoryClient,
) -> None:
    await client.check_and_complete("x", Signal(value=7))
    status = await client.try_complete_else_watch(
        ["x"], 60_000, condition=Condition.values_at_least(default_target=7)
    )
    assert status.state is OperationState.COMPLETED
    assert status.sequence > 0
    assert dict(status.result.values) == {"x": 7}


async def test_values_can_fall_below_target_again(client: AsyncPurgatoryClient) -> None:
    await client.try_complete_else_watch(
        ["a", "b"], 60_000, condition=Condition.values_at_least(default_target=5), operation_id="v"
    )
    await client.check_and_complete("a", Signal(value=5))
    await client.check_and_complete("a", Signal(value=3))  # moved back (e.g. truncation)
    assert await client.check_and_complete("b", Signal(value=9)) == 0
    assert await client.check_and_complete("a", Signal(value=6)) == 1


async def test_result_data_accumulates_up_to_the_limit(client: AsyncPurgatoryClient) -> None:
    # TEST_LIMITS: max_result_data_bytes=24.
    waiter = asyncio.create_task(
        client.wait(["d"], 60_000, condition=Condition.min_signals(3), operation_id="data")
    )
    await until_pending(client, 1)  # registered: the signals below count for it
    for chunk in (b"0123456789", b"abcdefghij", b"ABCDEFGHIJ"):
        await client.check_and_complete("d", Signal(data=chunk))
    status = await asyncio.wait_for(waiter, 5)
    assert status.result.data == b"0123456789abcdefghijABCD"
    assert status.result.data_truncated is True


async def test_known_values_outlive_the_bound_only_on_watched_keys(
    client: AsyncPurgatoryClient,
) -> None:
    """The value memory keeps at most ``max_tracked_values`` keys (100 here), sparing
    the keys a pending operation watches: the engine's watch lists say which."""
    never = Condition.min_signals(1000)
    await client.try_complete_else_watch(["kept"], 60_000, condition=never, operation_id="w")
    await client.check_and_complete("kept", Signal(value=3))
    await client.check_and_complete("gone", Signal(value=3))  # no operation watches it
    await client.batch_check_and_complete([(f"k{i}", Signal(value=1)) for i in range(150)])
    at_least_3 = Condition.values_at_least(default_target=3)
    kept = await client.try_complete_else_watch(["kept"], 60_000, condition=at_least_3)
    assert kept.state is OperationState.COMPLETED  # its value was spared
    gone = await client.try_complete_else_watch(["gone"], 60_000, condition=at_least_3)
    assert gone.state is OperationState.WATCHING  # evicted: it starts from nothing
    # Once "kept" is watched by nothing, it is as evictable as any other key.
    await client.force_complete("w")
    await client.batch_check_and_complete([(f"j{i}", Signal(value=1)) for i in range(150)])
    again = await client.try_complete_else_watch(["kept"], 60_000, condition=at_least_3)
    assert again.state is OperationState.WATCHING
