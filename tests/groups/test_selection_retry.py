"""Delivery selection together with nacks, retry backoff and batch acks, on MockTime
(explicit clock steps, no sleeps): a nacked or backing-off head of an ordering key keeps
the key blocked until it is redelivered and acked or dead-lettered; a redelivery after a
backoff counts against the rate window; a restore keeps a waiting head's key blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from purgatory_server import MockTime
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.groups import GroupMember, WorkerGroup
from purgatory_server._service.groups.backoff import BackoffType, RetryBackoff
from purgatory_server._service.groups.batch import BatchEntry
from purgatory_server._service.groups.entry import EntryState, GroupEntry
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.ordering import KeySource
from purgatory_server._service.groups.rate_limit import RateLimit
from purgatory_server._service.groups.records import RestoredGroup
from purgatory_server._service.groups.selection import Selection

from tests.groups.test_selection_logic import LIMITS, end, step, taken

LONG_LEASE = 60_000  # no lease runs out unless a test says so
ORDERED = Selection(ordering=KeySource("/"))


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
async def purgatory(clock: MockTime) -> AsyncIterator[NamedPurgatory]:
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=200)
    p = NamedPurgatory(
        settings, LIMITS, asyncio.get_running_loop(), time=clock, reaper_enabled=False
    )
    yield p
    p.shutdown_engine()


def join(
    p: NamedPurgatory,
    selection: Selection,
    backoff: RetryBackoff | None = None,
    visibility: int = LONG_LEASE,
) -> tuple[WorkerGroup, GroupMember]:
    return p.groups.join("workers", visibility, 3, 16, selection=selection, backoff=backoff)


def sent(member: GroupMember) -> list[tuple[str, int]]:
    return [(d.outcome.operation_id, d.attempt) for d in taken(member)]


async def test_a_nacked_head_keeps_its_key_blocked_until_acked_or_dead(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, member = join(purgatory, ORDERED)
    end(purgatory, "k/1", "k/2", "k/3", "other/1")
    assert sent(member) == [("k/1", 1), ("other/1", 1)]
    # A nack with a delay: k/1 waits, and k/2 does not overtake it meanwhile.
    group.nack(1, 1, 500, False)
    group.ack(4, 1)
    step(purgatory, clock, 499)
    assert sent(member) == []
    assert group.tally()[EntryState.WAITING] == 1
    step(purgatory, clock, 1)
    assert sent(member) == [("k/1", 2)]  # the head again, not k/2
    # Acked (in a batch, with a stale entry beside it): the key moves on to k/2.
    results = group.settle([BatchEntry(1, 1), BatchEntry(1, 2)])
    assert [r.code != 0 for r in results] == [True, False]
    assert sent(member) == [("k/2", 1)]
    # A batch nack to a delay, then one to dead-letter the waiting head: k/3 goes.
    (result,) = group.settle([BatchEntry(2, 1, nack=True, delay_ms=10_000)])
    assert result.retry_at_ms == clock.wall_clock_ms() + 10_000
    assert sent(member) == []
    (result,) = group.settle([BatchEntry(2, 0, nack=True, dead_letter=True)])
    assert result.dead_letter
    assert sent(member) == [("k/3", 1)]
    # Nothing of the dead one is left waiting: its wait's timer fires into nothing.
    step(purgatory, clock, 10_000)
    assert sent(member) == []
    assert group.counts() == (0, 1, 1)


async def test_a_nack_at_once_gives_the_key_back_to_its_head(purgatory: NamedPurgatory) -> None:
    group, member = join(purgatory, ORDERED)
    end(purgatory, "k/1", "k/2")
    assert sent(member) == [("k/1", 1)]
    group.nack(1, 1, 0, False)
    assert sent(member) == [("k/1", 2)]
    group.ack(1, 2)
    assert sent(member) == [("k/2", 1)]


async def test_a_lapsed_head_backing_off_keeps_its_key_blocked(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    backoff = RetryBackoff(BackoffType.FIXED, 300)
    group, member = join(purgatory, ORDERED, backoff, visibility=1_000)
    end(purgatory, "k/1", "k/2")
    assert sent(member) == [("k/1", 1)]
    step(purgatory, clock, 1_000)  # the lease lapses: k/1 waits out the backoff
    assert sent(member) == []
    step(purgatory, clock, 299)
    assert sent(member) == []
    step(purgatory, clock, 1)
    assert sent(member) == [("k/1", 2)]
    group.ack(1, 2)
    assert sent(member) == [("k/2", 1)]


async def test_a_redelivery_after_a_backoff_counts_against_the_rate_window(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    backoff = RetryBackoff(BackoffType.FIXED, 300)
    group, member = join(purgatory, Selection(rate_limit=RateLimit(2, 1_000)), backoff)
    end(purgatory, "o1", "o2", "o3")
    assert sent(member) == [("o1", 1), ("o2", 1)]  # the window is full
    assert group.nack(1, 1, None, False) == clock.wall_clock_ms() + 300  # the backoff
    step(purgatory, clock, 300)
    # o1 is ready again, but the window still holds both deliveries made at 0.
    assert sent(member) == []
    assert group.tally()[EntryState.READY] == 2
    step(purgatory, clock, 699)
    assert sent(member) == []
    step(purgatory, clock, 1)
    # Room for two: the redelivery (lowest sequence) and o3, which fill the window.
    assert sent(member) == [("o1", 2), ("o3", 1)]
    group.nack(3, 1, 0, False)  # ready at once, but the window is full until 2000
    step(purgatory, clock, 999)
    assert sent(member) == []
    step(purgatory, clock, 1)
    assert sent(member) == [("o3", 2)]


async def test_a_restored_waiting_head_keeps_its_key_blocked(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    source, _ = purgatory.groups.join("source", 0, 0, 0)  # holds the outcomes to restore
    end(purgatory, "k/1", "k/2", "j/1")
    outcomes = [e.outcome for e in source.entries()]
    waiting = GroupEntry(outcomes[0], attempts=1)
    waiting.retry_at_ms = clock.wall_clock_ms() + 200
    rest = [GroupEntry(o) for o in outcomes[1:]]
    config = GroupConfig(LONG_LEASE, 3, selection=ORDERED)
    purgatory.groups.restore({"g": RestoredGroup(config, 3, [*rest, waiting])})
    group, member = purgatory.groups.join("g", 0, 0, 16)
    assert sent(member) == [("j/1", 1)]  # k/2 waits behind its waiting head
    step(purgatory, clock, 200)
    assert sent(member) == [("k/1", 2)]
    group.ack(1, 2)
    assert sent(member) == [("k/2", 1)]
