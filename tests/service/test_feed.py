"""The feed on its own (no server, no gRPC): sequences, delivery after the journal wrote,
subscribers' gap-free hand-over, waiters keyed by operation id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from purgatory_server._engine.time import MockTime
from purgatory_server._service.core.journal_hooks import NullHooks
from purgatory_server._service.core.operation import RemoteOperation, SignalSlot
from purgatory_server._service.core.progress import FirstSignal
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.errors import (
    Code,
    LimitExceeded,
    OutcomeNotRecorded,
    OutOfRange,
    ShuttingDown,
    SlowSubscriber,
)
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.event_log import EventLog
from purgatory_server._service.outcomes.feed import Feed
from purgatory_server._service.outcomes.subscriptions import (
    MATCH_ALL,
    EventFilter,
    outcome_size,
)

CLOCK = MockTime()


def ended(op_id: str, state: OperationState = OperationState.COMPLETED) -> RemoteOperation:
    """An operation that ended with ``state`` (as the engine would leave it)."""
    definition = OperationDefinition(("k",), 1000, ConditionSpec(), b"p")
    progress = FirstSignal(data_limit=100, sources_limit=10)
    op = RemoteOperation(op_id, definition, progress, slot=SignalSlot(CLOCK, lambda _: None))
    assert op.end(state)
    return op


class HeldJournal(NullHooks):
    """A journal that 'writes' only when told: after_write callbacks wait for flush()
    (or fail()'s error)."""

    __slots__ = ("held", "recorded")

    def __init__(self) -> None:
        self.held: list[tuple[Callable[[], None], Callable[[BaseException], None]]] = []
        self.recorded: list[int] = []

    def on_outcome(self, purgatory: str, outcome: Outcome, definition: OperationDefinition) -> None:
        self.recorded.append(outcome.sequence)

    def after_write(
        self, callback: Callable[[], None], failed: Callable[[BaseException], None]
    ) -> None:
        self.held.append((callback, failed))

    def flush(self) -> None:
        held, self.held = self.held, []
        for callback, _ in held:
            callback()

    def fail(self, exc: BaseException) -> None:
        held, self.held = self.held, []
        for _, failed in held:
            failed(exc)


def make_feed(journal: NullHooks | None = None, *, retained: int = 100, **kw: int) -> Feed:
    return Feed(
        "p",
        EventLog(retained),
        journal,
        asyncio.get_running_loop(),
        max_subscribers=kw.get("max_subscribers", 10),
        subscriber_buffer=kw.get("subscriber_buffer", 100),
        subscriber_buffer_bytes=kw.get("subscriber_buffer_bytes", 1 << 30),
    )


async def test_publish_numbers_retains_and_delivers_at_once_in_memory() -> None:
    feed = make_feed()
    sub = feed.subscribe(None, MATCH_ALL)
    waiter = asyncio.ensure_future(feed.wait_one(ended_pending := ended("a")))
    await asyncio.sleep(0)  # the waiter attaches
    assert feed.waiting("a") == 1
    outcomes = feed.publish([ended_pending, ended("b", OperationState.CANCELLED)])
    assert [(o.sequence, o.operation_id, o.state) for o in outcomes] == [
        (1, "a", OperationState.COMPLETED),
        (2, "b", OperationState.CANCELLED),
    ]
    assert (await waiter) == outcomes[0]
    assert feed.waiting("a") == 0
    assert await sub.next_batch() == outcomes
    assert feed.log.after(0) == outcomes and feed.last_sequence == 2


async def test_nobody_sees_an_outcome_before_the_journal_wrote_it() -> None:
    journal = HeldJournal()
    feed = make_feed(journal)
    before = feed.subscribe(None, MATCH_ALL)
    op = ended("a")
    waiter = asyncio.ensure_future(feed.wait_one(op))
    await asyncio.sleep(0)
    (outcome,) = feed.publish([op])
    assert journal.recorded == [1] and feed.last_sequence == 1
    # Written to the journal's buffer, not yet on disk: no waiter, no subscriber yet.
    await asyncio.sleep(0)
    assert not waiter.done() and before.buffered == 0
    # A subscriber arriving now starts after the last *delivered* sequence, and a replay
    # stops there too: the undelivered outcome reaches both exactly once, live.
    now = feed.subscribe(None, MATCH_ALL)
    replaying = feed.subscribe(0, MATCH_ALL)
    assert now.start_after == 0
    journal.flush()
    assert (await waiter) == outcome
    for sub in (before, now, replaying):
        assert await sub.next_batch() == [outcome]
        assert sub.buffered == 0


async def test_waiters_are_kept_by_id_and_taken_at_publish() -> None:
    """A waiter attached to a re-used id after the first outcome was published (while the
    journal writes it) must not receive that older outcome."""
    journal = HeldJournal()
    feed = make_feed(journal)
    first = ended("same")
    early = asyncio.ensure_future(feed.wait_one(first))
    await asyncio.sleep(0)
    (old,) = feed.publish([first])
    late = asyncio.ensure_future(feed.wait_one(ended("same")))
    await asyncio.sleep(0)
    journal.flush()
    assert (await early) == old
    await asyncio.sleep(0)
    assert not late.done() and feed.waiting("same") == 1
    late.cancel()
    with pytest.raises(asyncio.CancelledError):
        await late
    assert feed.waiting("same") == 0  # a caller that went away is detached


async def test_wait_all_resolves_once_with_every_outcome() -> None:
    feed = make_feed()
    ops = [ended(f"op-{i}") for i in range(3)]
    waiting = asyncio.ensure_future(feed.wait_all(ops))
    await asyncio.sleep(0)
    feed.publish(ops[:2])
    await asyncio.sleep(0)
    assert not waiting.done()
    feed.publish(ops[2:])
    outcomes = await waiting
    assert sorted(outcomes) == ["op-0", "op-1", "op-2"]
    assert [outcomes[f"op-{i}"].sequence for i in range(3)] == [1, 2, 3]
    assert await feed.wait_all([]) == {}


async def test_subscribe_replays_filters_and_bounds() -> None:
    feed = make_feed(retained=2, max_subscribers=2)
    feed.publish([ended("a"), ended("b", OperationState.EXPIRED), ended("c")])
    expired = EventFilter(states=frozenset({OperationState.EXPIRED}))
    sub = feed.subscribe(1, expired)
    assert [o.operation_id for o in await sub.next_batch()] == ["b"]
    with pytest.raises(OutOfRange):
        feed.subscribe(0, MATCH_ALL)  # sequence 1 is no longer retained
    feed.subscribe(None, MATCH_ALL)
    with pytest.raises(LimitExceeded, match="max_subscribers is 2"):
        feed.subscribe(None, MATCH_ALL)
    feed.unsubscribe(sub)
    assert feed.subscriber_count == 1


async def test_close_fails_waiters_and_ends_streams() -> None:
    feed = make_feed()
    sub = feed.subscribe(None, MATCH_ALL)
    waiter = asyncio.ensure_future(feed.wait_one(ended("a")))
    await asyncio.sleep(0)
    feed.close(ShuttingDown())
    with pytest.raises(ShuttingDown):
        await waiter
    with pytest.raises(ShuttingDown):
        await sub.next_batch()
    assert feed.waiting("a") == 0


async def test_a_failed_write_ends_its_waiters_unavailable_and_offers_nothing() -> None:
    journal = HeldJournal()
    feed = make_feed(journal)
    sub = feed.subscribe(None, MATCH_ALL)
    one = asyncio.ensure_future(feed.wait_one(ended("lost")))
    both = asyncio.ensure_future(feed.wait_all([ended("lost-a"), ended("lost-b")]))
    await asyncio.sleep(0)
    feed.publish([ended("lost"), ended("lost-a"), ended("lost-b")])
    journal.fail(OSError(5, "EIO"))
    for waiter in (one, both):
        with pytest.raises(OutcomeNotRecorded) as failed:
            await waiter
        assert failed.value.code is Code.UNAVAILABLE and "EIO" in failed.value.message
    assert sub.buffered == 0  # an unwritten outcome reaches no subscriber
    assert feed._unwritten == {}


async def test_close_ends_waiters_whose_outcome_is_still_being_written() -> None:
    """An owner evicted while its append hangs: the detached waiters end with the close's
    error (UNAVAILABLE) at once; the write's late result changes nothing."""
    journal = HeldJournal()
    feed = make_feed(journal)
    waiter = asyncio.ensure_future(feed.wait_one(ended("hanging")))
    await asyncio.sleep(0)
    feed.publish([ended("hanging")])
    feed.close(ShuttingDown("evicted"))
    with pytest.raises(ShuttingDown):
        await waiter
    journal.flush()  # nothing left to deliver to
    assert feed._unwritten == {}


async def test_a_subscriber_past_its_byte_bound_is_cut_freed_and_leaves_at_once() -> None:
    size = outcome_size(make_feed().publish([ended("pp")])[0])  # as b0..b2 (2-char ids)
    feed = make_feed(subscriber_buffer_bytes=3 * size)
    sub = feed.subscribe(None, MATCH_ALL)
    feed.publish([ended("a")])
    assert sub.pop() is not None  # handed to the transport: the resume point
    feed.publish([ended(f"b{i}") for i in range(3)])  # 3 fit the byte bound
    assert (sub.buffered, sub.buffered_bytes, feed.subscriber_count) == (3, 3 * size, 1)
    feed.publish([ended("c")])  # the fourth passes it: cut in the same loop turn
    assert (sub.buffered, sub.buffered_bytes, feed.subscriber_count) == (0, 0, 0)
    with pytest.raises(SlowSubscriber) as info:
        await sub.next_batch()
    assert info.value.resume_after == 1 and info.value.code is Code.RESOURCE_EXHAUSTED
    feed.publish([ended("d")])  # a cut subscriber is offered nothing more
    assert sub.buffered == 0


async def test_one_outcome_larger_than_the_byte_bound_still_fits_an_empty_buffer() -> None:
    feed = make_feed(subscriber_buffer_bytes=1)
    sub = feed.subscribe(None, MATCH_ALL)
    (outcome,) = feed.publish([ended("big")])
    assert await sub.next_batch() == [outcome] and feed.subscriber_count == 1
