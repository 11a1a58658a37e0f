"""Nack, retry backoff and batch acks of worker groups on MockTime: explicit clock
steps, no sleeps (docs/service.md "Worker groups": negative acknowledgement, retry
backoff, batch acknowledgements)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from purgatory_server import MockTime
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.groups import GroupMember, WorkerGroup
from purgatory_server._service.groups.backoff import BackoffType, RetryBackoff
from purgatory_server._service.groups.batch import BatchEntry
from purgatory_server._service.groups.entry import EntryState
from purgatory_server._service.model.errors import Code, FailedPrecondition, NotFound

from tests.groups.test_leases import end, step, taken

LIMITS = Limits(max_groups=2, max_group_backlog=8)
VISIBILITY = 1_000
EXPONENTIAL = RetryBackoff(BackoffType.EXPONENTIAL, 100, max_delay_ms=350)


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
async def purgatory(clock: MockTime) -> AsyncIterator[NamedPurgatory]:
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=100)
    p = NamedPurgatory(
        settings, LIMITS, asyncio.get_running_loop(), time=clock, reaper_enabled=False
    )
    yield p
    p.shutdown_engine()


def join(
    p: NamedPurgatory, backoff: RetryBackoff | None = None, attempts: int = 5
) -> tuple[WorkerGroup, GroupMember]:
    return p.groups.join("workers", VISIBILITY, attempts, 16, backoff=backoff)


def attempts_of(member: GroupMember) -> list[tuple[int, int]]:
    return [(d.outcome.sequence, d.attempt) for d in taken(member)]


async def test_nack_without_delay_redelivers_at_once_as_the_next_attempt(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory)
    end(purgatory, "o1")
    assert attempts_of(a) == [(1, 1)]
    assert group.nack(1, 1, None, False) == clock.wall_clock_ms()
    assert attempts_of(a) == [(1, 2)]
    with pytest.raises(FailedPrecondition, match="lease lost"):
        group.nack(1, 1, 0, False)  # fenced: attempt 1 is not the latest
    with pytest.raises(FailedPrecondition):
        group.ack(1, 1)
    group.ack(1, 2)
    with pytest.raises(NotFound):
        group.nack(1, 2, None, False)


async def test_nack_with_a_delay_is_offered_again_exactly_then(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory)
    end(purgatory, "o1")
    taken(a)
    at = group.nack(1, 1, 250, False)
    assert at == clock.wall_clock_ms() + 250
    assert group.tally()[EntryState.WAITING] == 1
    step(purgatory, clock, 249)
    assert taken(a) == []
    step(purgatory, clock, 1)
    assert attempts_of(a) == [(1, 2)]


async def test_nack_to_dead_letter_and_nack_of_a_dead_letter(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory, attempts=2)
    end(purgatory, "o1", "o2")
    taken(a)
    assert group.nack(1, 1, None, True) == 0  # rejected: a dead letter now
    assert group.tally()[EntryState.DEAD] == 1
    # A dead letter stays one (Redrive revives it), whoever nacks it.
    assert group.nack(1, 1, 0, False) == 0
    assert group.nack(1, 0, None, False) == 0
    with pytest.raises(FailedPrecondition):
        group.nack(1, 7, None, False)
    assert group.counts() == (0, 1, 1)
    # Out of attempts: a nack dead-letters as an expiry would.
    group.nack(2, 1, 0, False)
    assert attempts_of(a) == [(2, 2)]
    assert group.nack(2, 2, 0, False) == 0
    assert group.counts() == (0, 0, 2)
    step(purgatory, clock, VISIBILITY * 3)
    assert taken(a) == []


async def test_exponential_backoff_after_lapsed_leases_keeps_the_fencing(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory, EXPONENTIAL)
    end(purgatory, "o1")
    assert attempts_of(a) == [(1, 1)]
    # Each lapse waits 100, 200, then 350 (capped) ms before the next attempt.
    for attempt, wait in ((2, 100), (3, 200), (4, 350)):
        step(purgatory, clock, VISIBILITY)
        assert taken(a) == [] and group.tally()[EntryState.WAITING] == 1
        step(purgatory, clock, wait - 1)
        assert taken(a) == []
        step(purgatory, clock, 1)
        assert attempts_of(a) == [(1, attempt)]
        with pytest.raises(FailedPrecondition):
            group.ack(1, attempt - 1)
    # A nack without a delay uses the backoff too (the 4th failure: capped at 350).
    assert group.nack(1, 4, None, False) == clock.wall_clock_ms() + 350
    group.ack(1, 4)  # a late ack of the latest attempt, while waiting, still counts
    assert len(group) == 0


async def test_a_redrive_restarts_the_backoff(purgatory: NamedPurgatory, clock: MockTime) -> None:
    group, a = join(purgatory, EXPONENTIAL, attempts=2)
    end(purgatory, "o1")
    taken(a)
    group.nack(1, 1, None, False)
    step(purgatory, clock, 100)
    assert attempts_of(a) == [(1, 2)]
    group.nack(1, 2, None, False)  # the budget is spent: dead
    assert group.redrive(None) == [1]
    assert attempts_of(a) == [(1, 3)]
    assert group.nack(1, 3, None, False) == clock.wall_clock_ms() + 100  # first wait again


async def test_fixed_backoff_with_jitter_stays_in_its_range() -> None:
    backoff = RetryBackoff(BackoffType.FIXED, 1_000, jitter=0.25)
    rng = random.Random(7)
    waits = {backoff.wait_ms(n, rng) for n in range(1, 200)}
    assert min(waits) >= 750 and max(waits) <= 1_000 and len(waits) > 50
    assert backoff.longest_ms(9) == 1_000
    assert RetryBackoff(BackoffType.EXPONENTIAL, 3).longest_ms(10_000) == 12 * 3600 * 1000


async def test_batch_applies_each_entry_alone(purgatory: NamedPurgatory, clock: MockTime) -> None:
    group, a = join(purgatory)
    end(purgatory, "o1", "o2", "o3", "o4")
    assert [d for _, d in attempts_of(a)] == [1, 1, 1, 1]
    group.nack(2, 1, 0, False)
    assert attempts_of(a) == [(2, 2)]
    results = group.settle(
        [
            BatchEntry(1, 1),  # ok
            BatchEntry(2, 1),  # stale: attempt 2 holds it
            BatchEntry(9, 1),  # never taken in
            BatchEntry(3, 1, nack=True, delay_ms=500),
            BatchEntry(1, 1),  # acked a moment ago
            BatchEntry(4, 0, nack=True, dead_letter=True),
        ]
    )
    assert [(r.sequence, r.code) for r in results] == [
        (1, 0),
        (2, Code.FAILED_PRECONDITION),
        (9, Code.NOT_FOUND),
        (3, 0),
        (1, Code.NOT_FOUND),
        (4, 0),
    ]
    assert "lease lost" in results[1].message
    assert (results[3].dead_letter, results[3].retry_at_ms) == (False, clock.wall_clock_ms() + 500)
    assert results[5].dead_letter
    tally = group.tally()
    assert (tally[EntryState.LEASED], tally[EntryState.WAITING], tally[EntryState.DEAD]) == (
        1,
        1,
        1,
    )
    assert len(group) == 3  # 1 acked; 2 still leased (attempt 2); 3 waiting; 4 dead
