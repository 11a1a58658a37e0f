"""The feed: the one owner of a purgatory's outcomes.

Everything that happens to an operation once it has ended goes through :class:`Feed`:
its sequence number (1, 2, 3, ... per purgatory, no gaps), the retained window
(:class:`~.event_log.EventLog`) subscribers resume from, the journal record, and delivery
to subscribers (:class:`~.subscriptions.Subscriber`) and to long-poll waiters, kept by
operation id (an operation never points back at the calls waiting on it).

One path for every outcome: :meth:`Feed.publish` numbers, retains and journals the
outcomes and delivers them once written (``after_write``): at once without a journal,
when the records are on disk with a durable one, so nobody sees an outcome a crash could
take back. Waiters are detached from their operation at publish time and travel with the
outcome, so an id re-used meanwhile cannot catch an older outcome.

No orphaned waiter: a batch whose outcomes have waiters is kept in ``_unwritten`` while
its write is on the way. If the write fails, or the feed is closed first (shutdown,
eviction of a purgatory whose owner lost it), those waiters end with UNAVAILABLE
(:class:`~.errors.OutcomeNotRecorded`, or the close's error): the client re-sends, to
the new owner if the purgatory moved, and never waits in silence. Subscribers and
groups are never offered an outcome that was not written.

Gap-free hand-over to subscribers: a subscriber starts after the last *delivered*
sequence (or replays the window from ``after_sequence`` up to it), and delivery offers it
only outcomes after its start, all in the same loop turn.

Thread safety: loop-confined; outcomes arrive from the purgatory's inbox on the loop
thread, and waiters and subscribers are created, resolved and detached there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._service.model.errors import (
    Code,
    LimitExceeded,
    OutcomeNotRecorded,
    ServiceError,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.sizes import result_bytes
from purgatory_server._service.outcomes.event_log import EventLog
from purgatory_server._service.outcomes.subscriptions import (
    BufferBudget,
    EventFilter,
    Subscriber,
    outcome_size,
)

if TYPE_CHECKING:
    from purgatory_server._service.model.definitions import OperationDefinition
    from purgatory_server._service.model.ended import Ended


class OutcomeSink(Protocol):
    """Who else takes every written outcome: the purgatory's worker groups (falsy while
    it has none)."""

    def __len__(self) -> int: ...

    def offer(self, outcome: Outcome) -> None: ...


class OutcomeJournal(Protocol):
    """What the feed asks of a durable purgatory's journal (the core's ``JournalHooks``)."""

    def on_outcome(
        self, purgatory: str, outcome: Outcome, definition: OperationDefinition
    ) -> None: ...

    def after_write(
        self, callback: Callable[[], None], failed: Callable[[BaseException], None]
    ) -> None: ...


__all__ = ["BatchWaiter", "Feed", "Waiter"]

# One published batch on its way to delivery: each outcome with the waiters it resolves.
_Delivery = list[tuple[Outcome, "Waiter | list[Waiter] | None"]]


@mypyc_attr(allow_interpreted_subclasses=True)
class Waiter:
    """Resolved with the outcome of one operation, or failed (shutdown)."""

    __slots__ = ("future",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[Outcome] = loop.create_future()

    def deliver(self, outcome: Outcome) -> None:
        if not self.future.done():
            self.future.set_result(outcome)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class BatchWaiter(Waiter):
    """One future for a whole batch: resolved once ``remaining`` outcomes arrived."""

    __slots__ = ("outcomes", "remaining")

    def __init__(self, loop: asyncio.AbstractEventLoop, remaining: int) -> None:
        super().__init__(loop)
        self.remaining = remaining
        self.outcomes: dict[str, Outcome] = {}

    def deliver(self, outcome: Outcome) -> None:
        self.outcomes[outcome.operation_id] = outcome
        self.remaining -= 1
        if self.remaining <= 0 and not self.future.done():
            self.future.set_result(outcome)


class Feed:
    """Sequences, retained window, subscribers and waiters of one purgatory (loop-confined)."""

    __slots__ = (
        "_buffer",
        "_buffer_bytes",
        "_buffers",
        "_delivered",
        "_groups",
        "_journal",
        "_log",
        "_loop",
        "_max_subscribers",
        "_subscribers",
        "_unwritten",
        "_waiters",
        "cut_off",
        "name",
    )

    def __init__(
        self,
        name: str,
        log: EventLog,
        journal: OutcomeJournal | None,
        loop: asyncio.AbstractEventLoop,
        *,
        max_subscribers: int,
        subscriber_buffer: int,
        subscriber_buffer_bytes: int = 1 << 62,
        groups: OutcomeSink | None = None,
        buffers: BufferBudget | None = None,
    ) -> None:
        self.name = name
        self._log = log
        self._journal = journal
        self._loop = loop
        self._max_subscribers = max_subscribers
        self._buffer = subscriber_buffer
        # Subscriber buffers are charged here (the memory budget's held pool).
        self._buffers = buffers
        self._buffer_bytes = subscriber_buffer_bytes
        self._subscribers: list[Subscriber] = []
        # Operation id -> the long-polls and sessions waiting for its outcome: one waiter
        # (the common case, kept as it is: no list per pending operation) or a list.
        self._waiters: dict[str, Waiter | list[Waiter]] = {}
        # Batches with waiters whose journal write is on the way, by first sequence.
        self._unwritten: dict[int, _Delivery] = {}
        # The last sequence offered to anyone (behind last_sequence while a durable
        # journal is still writing the rest).
        self._delivered = log.last_sequence
        # Worker groups take every outcome once it is written, like subscribers.
        self._groups = groups
        # Subscribe streams ended for falling more than subscriber_buffer behind.
        self.cut_off = 0

    # ----------------------------------------------------------------- introspection
    @property
    def log(self) -> EventLog:
        return self._log

    @property
    def last_sequence(self) -> int:
        return self._log.last_sequence

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def buffered(self) -> int:
        """Outcomes queued to this purgatory's subscribers, not yet sent (any thread: the
        list is copied in one GIL-atomic call)."""
        return sum(sub.buffered for sub in list(self._subscribers))

    def _cut_off(self, sub: Subscriber) -> None:
        """A subscriber cut for falling behind: counted, and no longer a subscriber."""
        self.cut_off += 1
        self.unsubscribe(sub)

    def waiting(self, operation_id: str) -> int:
        """How many calls wait for ``operation_id``'s outcome (tests, diagnostics)."""
        waiting = self._waiters.get(operation_id)
        return 0 if waiting is None else len(_each(waiting))

    # ----------------------------------------------------------------- outcomes
    def publish(self, ops: Sequence[Ended]) -> list[Outcome]:
        """Number, retain and journal each ended operation; deliver once written.

        Returns the outcomes in the order of ``ops``.
        """
        log = self._log
        name = self.name
        journal = self._journal
        on_outcome = None if journal is None else journal.on_outcome
        pop_waiters = self._waiters.pop
        sequence = log.last_sequence
        outcomes: list[Outcome] = []
        delivery: _Delivery = []
        waited = False
        for op in ops:
            op_id = op.operation_id
            definition = op.definition
            keys = definition.keys
            payload = definition.payload
            result = op.result
            sequence += 1
            outcome = Outcome(
                sequence,
                name,
                op_id,
                op.state,
                keys,
                payload,
                result,
                op.create_time_ms,
                op.due_time_ms,
                op.complete_time_ms,
                op.traceparent,
                result_bytes(op_id, keys, payload, result),  # once (model.sizes)
            )
            outcomes.append(outcome)
            waiters = pop_waiters(op_id, None)
            if waiters is not None:
                waited = True
            delivery.append((outcome, waiters))
        log.extend(outcomes)
        if on_outcome is not None:
            for op, outcome in zip(ops, outcomes, strict=True):
                on_outcome(name, outcome, op.definition)
        token = 0
        if waited and on_outcome is not None:
            token = outcomes[0].sequence
            self._unwritten[token] = delivery
        if journal is None:
            self._deliver(delivery, token)
        else:
            journal.after_write(
                partial(self._deliver, delivery, token), partial(self._not_written, token)
            )
        return outcomes

    def _not_written(self, token: int, exc: BaseException) -> None:
        """The write holding a batch failed: end its waiters (see module docstring)."""
        delivery = self._unwritten.pop(token, None) if token else None
        if delivery is None:
            return
        for outcome, waiters in delivery:
            if waiters is not None:
                error = _lost(self.name, outcome, exc)
                for waiter in _each(waiters):
                    waiter.fail(error)

    def _deliver(self, delivery: _Delivery, token: int = 0) -> None:
        if token:
            self._unwritten.pop(token, None)
        subscribers = self._subscribers
        groups = self._groups
        group_offer = groups.offer if groups else None
        for outcome, waiters in delivery:
            sequence = outcome.sequence
            self._delivered = sequence
            if subscribers:
                size = outcome_size(outcome)  # once per outcome, not per subscriber
                # A copy: a subscriber cut by this offer leaves the list (on_cut).
                for sub in tuple(subscribers):
                    if sequence > sub.start_after:
                        sub.offer(outcome, size)
            if group_offer is not None:
                group_offer(outcome)
            if waiters is not None:
                if isinstance(waiters, list):
                    for waiter in waiters:
                        waiter.deliver(outcome)
                else:
                    waiters.deliver(outcome)

    # ----------------------------------------------------------------- waiters
    def attach(self, operation_id: str, waiter: Waiter) -> None:
        """Wait for a pending (not yet published) operation's outcome."""
        waiters = self._waiters
        attached = waiters.get(operation_id)
        if attached is None:
            waiters[operation_id] = waiter
        elif isinstance(attached, list):
            attached.append(waiter)
        else:
            waiters[operation_id] = [attached, waiter]

    def detach(self, operation_id: str, waiter: Waiter) -> None:
        """Stop waiting (the caller went away); the operation stays as it is."""
        attached = self._waiters.get(operation_id)
        if attached is waiter:
            del self._waiters[operation_id]
        elif isinstance(attached, list) and waiter in attached:
            attached.remove(waiter)
            if not attached:
                del self._waiters[operation_id]

    async def wait_one(self, op: Ended) -> Outcome:
        """The outcome of pending ``op``, once delivered.

        Raises what the waiter was failed with (e.g. ShuttingDown). On cancellation (the
        caller went away) the waiter is detached before re-raising.
        """
        waiter = Waiter(self._loop)
        op_id = op.operation_id
        waiters = self._waiters
        if op_id not in waiters:  # attach(), inlined: the unbatched long-poll's hot path
            waiters[op_id] = waiter
        else:
            self.attach(op_id, waiter)
        try:
            return await waiter.future
        finally:
            if op_id in waiters:  # published: the feed already took the waiters
                self.detach(op_id, waiter)

    async def wait_all(self, ops: Sequence[Ended]) -> dict[str, Outcome]:
        """The outcomes of every pending operation of ``ops`` by id (one future for all)."""
        if not ops:
            return {}
        waiter = BatchWaiter(self._loop, len(ops))
        for op in ops:
            self.attach(op.operation_id, waiter)
        try:
            await waiter.future
            return waiter.outcomes
        finally:
            for op in ops:
                self.detach(op.operation_id, waiter)

    # ----------------------------------------------------------------- subscribers
    def subscribe(self, after_sequence: int | None, event_filter: EventFilter) -> Subscriber:
        """A subscriber replaying what is retained after ``after_sequence``, then live."""
        subscribers = self._subscribers
        if len(subscribers) >= self._max_subscribers:
            raise LimitExceeded(
                f"purgatory {self.name!r} has {len(subscribers)} subscribers; "
                f"max_subscribers is {self._max_subscribers}"
            )
        log = self._log
        last = self._delivered  # outcomes still being journaled are offered live
        if after_sequence is None:
            start, replay = last, []
        else:
            start, replay = after_sequence, log.after(after_sequence)
            if last < log.last_sequence:
                replay = [o for o in replay if o.sequence <= last]
        sub = Subscriber(
            event_filter,
            self._buffer,
            replay,
            start,
            buffer_bytes=self._buffer_bytes,
            on_cut=self._cut_off,
            buffers=self._buffers,
        )
        subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        """The stream is gone: forget it and give its buffer's charge back."""
        sub.drop()
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    # ----------------------------------------------------------------- life cycle
    def close(self, error: ServiceError) -> None:
        """Fail every waiter and end every subscriber stream with ``error``."""
        waiters, self._waiters = self._waiters, {}
        for attached in waiters.values():
            for waiter in _each(attached):
                waiter.fail(error)
        unwritten, self._unwritten = self._unwritten, {}
        for delivery in unwritten.values():  # their outcomes may never be written now
            for _, detached in delivery:
                if detached is not None:
                    for waiter in _each(detached):
                        waiter.fail(error)
        for sub in self._subscribers:
            sub.close(error)


def _each(waiting: Waiter | list[Waiter]) -> Sequence[Waiter]:
    """The waiters an entry of ``Feed._waiters`` holds (one is kept without a list)."""
    return waiting if isinstance(waiting, list) else (waiting,)


def _lost(purgatory: str, outcome: Outcome, exc: BaseException) -> ServiceError:
    """What a waiter of an unwritten outcome ends with: UNAVAILABLE always (a replicated
    purgatory's fenced owner already says so, naming the new owner)."""
    if isinstance(exc, ServiceError) and exc.code is Code.UNAVAILABLE:
        return exc
    return OutcomeNotRecorded(purgatory, outcome.operation_id, exc)
