"""Long-polls over real sockets: completed by a signal, by expiry, by ForceComplete;
a caller that goes away leaves its operation in the purgatory."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    DeadlineExceededError,
    OperationState,
    Signal,
)
from purgatory_server import MockTime

from tests.service.helpers import TEST_CONFIG, pending, until


async def test_long_poll_completed_by_signal(client: AsyncPurgatoryClient) -> None:
    waiter = asyncio.create_task(client.wait(["topic-0"], 60_000, payload=b"req-1"))
    await until(lambda: _is(pending(client), 1))
    assert not waiter.done()
    completed = await client.check_and_complete("topic-0", Signal(amount=7, source="r1"))
    status = await asyncio.wait_for(waiter, 5)
    assert completed == 1
    assert status.state is OperationState.COMPLETED
    assert status.sequence == 1
    assert status.created
    assert status.payload == b"req-1"
    assert status.result.signal_count == 1
    assert status.result.amount_sum == 7
    assert status.result.sources == ("r1",)
    assert status.create_time_ms <= status.complete_time_ms <= status.due_time_ms
    assert await pending(client) == 0


async def test_signal_on_other_key_does_not_complete(client: AsyncPurgatoryClient) -> None:
    status = await client.try_complete_else_watch(["a"], 60_000)
    assert status.state is OperationState.WATCHING
    assert status.sequence == 0
    assert await client.check_and_complete("b") == 0
    assert (await client.get_operation(status.operation_id)).state is OperationState.WATCHING


async def test_long_poll_expires_within_tolerance(client: AsyncPurgatoryClient) -> None:
    # Real time is the point here: the reaper must expire it without any prodding.
    start = time.monotonic()
    status = await asyncio.wait_for(client.wait(["never"], 200), 10)
    elapsed = time.monotonic() - start
    assert status.state is OperationState.EXPIRED
    assert 0.19 <= elapsed < 3.0, elapsed
    assert status.complete_time_ms - status.create_time_ms >= 195


async def test_a_lone_long_poll_is_answered_on_time(client: AsyncPurgatoryClient) -> None:
    # Nothing else is pending, so each arming makes a new head in an empty delay queue
    # and the reaper, blocked for up to 200 ms, must be woken for it. The compiled
    # engine once lost that wake-up: every lone long-poll came back 100-170 ms late.
    late_ms: list[float] = []
    for _ in range(5):
        start = time.monotonic()
        status = await asyncio.wait_for(client.wait(["lone"], 30), 10)
        assert status.state is OperationState.EXPIRED
        late_ms.append((time.monotonic() - start) * 1000 - 30)
    assert statistics.median(late_ms) < 60, late_ms


async def test_pure_timer_without_keys_expires(client: AsyncPurgatoryClient) -> None:
    status = await asyncio.wait_for(client.wait([], 50, payload=b"cancel-order-17"), 10)
    assert status.state is OperationState.EXPIRED
    assert status.payload == b"cancel-order-17"


async def test_expiry_is_driven_by_the_injected_clock(serve) -> None:  # type: ignore[no-untyped-def]
    clock = MockTime()
    server, port = await serve(TEST_CONFIG, time=clock, reaper_enabled=False)
    purgatory = server.registry.get("default")
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}") as client:
        status = await client.try_complete_else_watch(["k"], 1_000)
        clock.sleep(999)
        purgatory.advance_clock(0)
        assert (await client.get_operation(status.operation_id)).state is OperationState.WATCHING
        clock.sleep(1)
        purgatory.advance_clock(0)
        done = await client.get_operation(status.operation_id)
        assert done.state is OperationState.EXPIRED
        assert done.complete_time_ms - done.create_time_ms == 1_000


async def test_long_poll_completed_by_force_complete(client: AsyncPurgatoryClient) -> None:
    waiter = asyncio.create_task(client.wait(["k"], 60_000, operation_id="job-1"))
    await until(lambda: _is(pending(client), 1))
    first = await client.force_complete("job-1")
    second = await client.force_complete("job-1")
    status = await asyncio.wait_for(waiter, 5)
    assert first.completed is True
    assert first.operation.state is OperationState.FORCE_COMPLETED
    assert second.completed is False
    assert second.operation.sequence == first.operation.sequence
    assert status.state is OperationState.FORCE_COMPLETED
    assert status.operation_id == "job-1"


async def test_disconnecting_long_poll_leaves_the_operation(
    client: AsyncPurgatoryClient, server
) -> None:  # type: ignore[no-untyped-def]
    # The deadline leaves the server time to register the call first, even on a loaded
    # machine (at 0.2 s a busy loop sometimes saw the call only after its deadline).
    with pytest.raises(DeadlineExceededError):
        await client.wait(["k"], 60_000, operation_id="gone", timeout=1.0)
    op = await client.get_operation("gone")
    assert op.state is OperationState.WATCHING
    # The cancelled call's waiter was detached: nothing refers to the dead RPC any more.
    await until(lambda: _true(not server.registry.get("default").feed.waiting("gone")))
    # A cancelled task (not only a deadline) behaves the same.
    task = asyncio.create_task(client.wait(["k"], 60_000, operation_id="gone-2"))
    await until(lambda: _is(pending(client), 2))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: _true(not server.registry.get("default").feed.waiting("gone-2")))
    assert await client.check_and_complete("k") == 2
    assert (await client.get_operation("gone")).state is OperationState.COMPLETED


async def test_reconnecting_long_poll_gets_the_outcome(
    client: AsyncPurgatoryClient, server
) -> None:  # type: ignore[no-untyped-def]
    feed = server.registry.get("default").feed
    with pytest.raises(DeadlineExceededError):
        await client.wait(["k"], 60_000, operation_id="retry-me", timeout=0.1)
    await until(lambda: _true(not feed.waiting("retry-me")))  # the first call is gone
    waiter = asyncio.create_task(client.wait(["k"], 60_000, operation_id="retry-me"))
    await until(lambda: _true(feed.waiting("retry-me") == 1))  # the re-send is waiting
    await client.check_and_complete("k")
    status = await asyncio.wait_for(waiter, 5)
    assert status.state is OperationState.COMPLETED
    assert status.created is False


async def _is(value: object, expected: object) -> bool:
    return await value == expected  # type: ignore[misc]


async def _true(value: bool) -> bool:
    return value
