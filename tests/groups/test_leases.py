"""Lease logic of worker groups on MockTime: explicit clock steps, no sleeps.

A real NamedPurgatory (timer, inbox, publish path) with its reaper off; the clock moves
only by ``clock.sleep`` + ``advance_clock``, so every expiry happens at an exact instant.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server import MockTime
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.groups import GroupMember, WorkerGroup
from purgatory_server._service.groups.member import Delivery
from purgatory_server._service.model.errors import FailedPrecondition, LimitExceeded, NotFound
from purgatory_server._service.wire.validation import operation_request

LIMITS = Limits(max_groups=2, max_group_backlog=4)
VISIBILITY = 1_000


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
async def purgatory(clock: MockTime) -> AsyncIterator[NamedPurgatory]:
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=100)
    loop = asyncio.get_running_loop()
    p = NamedPurgatory(settings, LIMITS, loop, time=clock, reaper_enabled=False)
    yield p
    p.shutdown_engine()


def end(p: NamedPurgatory, *ids: str) -> None:
    """Register and force-complete operations: each becomes one published outcome."""
    reqs = [
        operation_request(
            "", pb.TryCompleteElseWatchRequest(operation_id=i, timeout_ms=60_000), LIMITS
        )
        for i in ids
    ]
    p.register(reqs, [""] * len(reqs))
    for i in ids:
        p.force_complete(i)


def taken(member: GroupMember) -> list[Delivery]:
    out = list(member._queue)
    member._queue.clear()
    return out


def step(p: NamedPurgatory, clock: MockTime, ms: int) -> None:
    clock.sleep(ms)
    p.advance_clock(0)


def join(
    p: NamedPurgatory, prefetch: int = 16, attempts: int = 3
) -> tuple[WorkerGroup, GroupMember]:
    return p.groups.join("workers", VISIBILITY, attempts, prefetch)


async def test_each_outcome_goes_to_exactly_one_member(purgatory: NamedPurgatory) -> None:
    _group, a = join(purgatory)
    _, b = join(purgatory)
    end(purgatory, "o1", "o2", "o3", "o4")
    got_a, got_b = taken(a), taken(b)
    seqs = sorted(d.outcome.sequence for d in got_a + got_b)
    assert seqs == [1, 2, 3, 4]
    assert got_a and got_b  # round robin
    assert all(d.attempt == 1 for d in got_a + got_b)


async def test_unacked_lease_is_redelivered_exactly_at_its_deadline(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory, prefetch=1)
    end(purgatory, "o1")
    (first,) = taken(a)
    assert first.lease_deadline_ms == clock.wall_clock_ms() + VISIBILITY
    _, b = join(purgatory, prefetch=1)  # a holds its one lease: b gets nothing yet
    assert taken(b) == []
    step(purgatory, clock, VISIBILITY - 1)
    assert taken(a) == [] and taken(b) == []
    step(purgatory, clock, 1)
    redelivered = taken(a) + taken(b)
    assert [(d.outcome.sequence, d.attempt) for d in redelivered] == [(1, 2)]
    # The first holder lost the lease: its ack and extend are refused, the new one's count.
    with pytest.raises(FailedPrecondition):
        group.ack(1, 1)
    with pytest.raises(FailedPrecondition):
        group.extend(1, 1, 0)
    group.ack(1, 2)
    assert len(group) == 0
    with pytest.raises(NotFound):
        group.ack(1, 2)


async def test_alone_member_gets_its_own_outcome_back(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    _, a = join(purgatory)
    end(purgatory, "o1")
    taken(a)
    step(purgatory, clock, VISIBILITY)
    assert [d.attempt for d in taken(a)] == [2]


async def test_extend_moves_the_deadline(purgatory: NamedPurgatory, clock: MockTime) -> None:
    group, a = join(purgatory)
    end(purgatory, "o1")
    taken(a)
    step(purgatory, clock, 900)
    deadline = group.extend(1, 1, 500)
    assert deadline == clock.wall_clock_ms() + 500
    step(purgatory, clock, 499)
    assert taken(a) == []
    step(purgatory, clock, 1)
    assert [d.attempt for d in taken(a)] == [2]


async def test_disconnected_member_keeps_its_lease_until_it_expires(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory)
    _, b = join(purgatory)
    end(purgatory, "o1")
    holder, other = (a, b) if a._queue else (b, a)
    taken(holder)
    group.leave(holder)
    step(purgatory, clock, VISIBILITY - 1)
    assert taken(other) == []
    step(purgatory, clock, 1)
    assert [d.attempt for d in taken(other)] == [2]


async def test_poison_outcome_is_dead_lettered_then_redriven(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory, attempts=3)
    end(purgatory, "poison")
    attempts = []
    for _ in range(3):
        attempts += [d.attempt for d in taken(a)]
        step(purgatory, clock, VISIBILITY)
    assert attempts == [1, 2, 3]
    assert taken(a) == []
    page, more = group.dead_letters(0, 10)
    assert [(e.sequence, e.attempts) for e in page] == [(1, 3)] and more == 0
    assert group.counts() == (0, 0, 1)
    assert group.redrive([1, 99]) == [1]
    # Attempt numbers go on (fencing); the budget is fresh: three more deliveries.
    attempts = []
    for _ in range(3):
        attempts += [d.attempt for d in taken(a)]
        step(purgatory, clock, VISIBILITY)
    assert attempts == [4, 5, 6]
    assert group.counts() == (0, 0, 1)
    assert group.redrive(None) == [1]
    assert [d.attempt for d in taken(a)] == [7]
    with pytest.raises(FailedPrecondition):
        group.ack(1, 6)
    group.ack(1, 7)
    assert group.dead_letters(0, 10) == ([], 0)


async def test_dead_letters_page_in_sequence_order(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, a = join(purgatory, attempts=1)
    end(purgatory, "x1", "x2", "x3")
    taken(a)
    step(purgatory, clock, VISIBILITY)
    page, after = group.dead_letters(0, 2)
    assert [e.sequence for e in page] == [1, 2] and after == 2
    page, after = group.dead_letters(after, 2)
    assert [e.sequence for e in page] == [3] and after == 0


async def test_prefetch_bounds_leases_per_member(purgatory: NamedPurgatory) -> None:
    group, a = join(purgatory, prefetch=2)
    end(purgatory, "o1", "o2", "o3")
    assert [d.outcome.sequence for d in taken(a)] == [1, 2]
    group.ack(1, 1)
    assert [d.outcome.sequence for d in taken(a)] == [3]


async def test_backlog_limit_refuses_registrations_until_acked(purgatory: NamedPurgatory) -> None:
    group, _ = join(purgatory, prefetch=1)
    end(purgatory, "o1", "o2", "o3", "o4")
    assert len(group) == LIMITS.max_group_backlog
    with pytest.raises(LimitExceeded, match="max_group_backlog"):
        end(purgatory, "o5")
    group.ack(1, 0)
    end(purgatory, "o5")


async def test_group_limits_and_settings(purgatory: NamedPurgatory) -> None:
    join(purgatory)
    with pytest.raises(FailedPrecondition, match="visibility_timeout_ms 1000"):
        purgatory.groups.join("workers", 2_000, 0, 1)
    purgatory.groups.join("workers", 0, 0, 1)  # zero: the group's own settings
    purgatory.groups.join("second", 0, 0, 1)
    with pytest.raises(LimitExceeded, match="max_groups"):
        purgatory.groups.join("third", 0, 0, 1)
    purgatory.groups.delete("second", NotFound("gone"))
    purgatory.groups.join("third", 0, 0, 1)


async def test_group_starts_after_existing_outcomes(purgatory: NamedPurgatory) -> None:
    end(purgatory, "before")
    group, a = join(purgatory)
    end(purgatory, "after")
    assert [d.outcome.operation_id for d in taken(a)] == ["after"]
    assert group.last_sequence == 2


async def test_outcomes_wait_in_the_group_while_no_member_is_connected(
    purgatory: NamedPurgatory,
) -> None:
    group, a = join(purgatory)
    group.leave(a)
    end(purgatory, "o1", "o2")
    assert group.counts() == (2, 0, 0)
    _, b = join(purgatory)
    assert [d.outcome.sequence for d in taken(b)] == [1, 2]


def test_limits_default() -> None:
    assert Limits().max_groups == 16
    assert Limits().max_group_backlog == 100_000


async def test_group_keeps_outcomes_that_left_the_retained_window(
    clock: MockTime,
) -> None:
    settings = PurgatorySettings(name="small", max_pending=100, retained_events=2)
    p = NamedPurgatory(
        settings, LIMITS, asyncio.get_running_loop(), time=clock, reaper_enabled=False
    )
    try:
        group, a = join(p)
        group.leave(a)
        end(p, "o1", "o2", "o3", "o4")
        assert p.stats().oldest_sequence == 3  # the window rolled over 1 and 2
        _, b = join(p)
        assert [d.outcome.operation_id for d in taken(b)] == ["o1", "o2", "o3", "o4"]
    finally:
        p.shutdown_engine()


async def test_members_are_bounded_by_max_subscribers(clock: MockTime) -> None:
    settings = PurgatorySettings(name="m", max_pending=100)
    limits = Limits(max_subscribers=2)
    p = NamedPurgatory(
        settings, limits, asyncio.get_running_loop(), time=clock, reaper_enabled=False
    )
    try:
        group, a = p.groups.join("g", 0, 0, 1)
        p.groups.join("g", 0, 0, 1)
        with pytest.raises(LimitExceeded, match="max_subscribers"):
            p.groups.join("g", 0, 0, 1)
        group.leave(a)
        p.groups.join("g", 0, 0, 1)
    finally:
        p.shutdown_engine()
