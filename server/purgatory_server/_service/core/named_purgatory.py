"""NamedPurgatory: one named purgatory of the service.

It wraps the engine's :class:`DelayedOperationPurgatory` with the table of operations by
id (idempotent re-sends, ForceComplete, GetOperation), a bounded memory of recently
finished ids, the latest value per key, and the journal hooks. Everything about an
operation once it ended belongs to its :class:`~.feed.Feed`.

Thread safety: a NamedPurgatory is **loop-confined**; every public method must be called
on the event loop thread it was created on. Only ``RemoteOperation.on_complete`` runs
elsewhere (the timer's reaper or executor thread), and it touches only its own operation
and the thread-safe inbox of the :class:`~.publisher.Publisher`. Public methods that can
complete operations publish (``_settle``) before returning, and answer with the outcome
(with its sequence) of every operation that ended meanwhile. Registrations and signals
also publish first what the timer's threads handed over, so that due expiries are
answered before the loop takes on more intake.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from purgatory_server._engine.purgatory import DelayedOperationPurgatory
from purgatory_server._engine.reaper import TimerReaper
from purgatory_server._engine.system_timer import SystemTimer
from purgatory_server._engine.time import SYSTEM_TIME, Time
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.core.deadlines import Deadlines
from purgatory_server._service.core.journal_hooks import NULL_HOOKS, JournalHooks
from purgatory_server._service.core.latest_values import LatestValues
from purgatory_server._service.core.listing import OperationsView
from purgatory_server._service.core.operation import RemoteOperation, SignalSlot
from purgatory_server._service.core.operation_table import (
    OperationTable,
    Registration,
    Target,
    resolve,
)
from purgatory_server._service.core.progress import check_data_room
from purgatory_server._service.core.snapshots import Gauges, PurgatoryStats
from purgatory_server._service.groups import GroupSet
from purgatory_server._service.model.conditions import SignalRecord
from purgatory_server._service.model.definitions import (
    OperationDefinition,
    OperationRequest,
    RestoredOperation,
)
from purgatory_server._service.model.errors import FailedPrecondition, ServiceError
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.quoting import quote
from purgatory_server._service.outcomes.event_log import EventLog
from purgatory_server._service.outcomes.feed import Feed, Waiter
from purgatory_server._service.outcomes.incarnation import new_incarnation
from purgatory_server._service.outcomes.publisher import Publisher
from purgatory_server._service.outcomes.subscriptions import EventFilter, Subscriber
from purgatory_server._service.schedules.table import ScheduleTable
from purgatory_server._service.telemetry.context import current_traceparent
from purgatory_server._service.telemetry.counters import PurgatoryMetrics

__all__ = ["NamedPurgatory", "OperationRequest", "PurgatoryStats", "Registration"]

logger = logging.getLogger("purgatory_server.service")

# The engine's watch lists, in lock stripes: a service purgatory's are touched by its loop
# thread and the reaper only, so a few stripes do (the engine's 512 would cost ~190 KB of
# locks per purgatory, idle or not).
WATCH_SHARDS = 16


class NamedPurgatory:
    """The service-side state of one purgatory; loop-confined (see module docstring)."""

    def __init__(
        self,
        settings: PurgatorySettings,
        limits: Limits,
        loop: asyncio.AbstractEventLoop,
        *,
        time: Time | None = None,
        journal: JournalHooks | None = None,
        event_log: EventLog | None = None,
        reaper_enabled: bool = True,
        reaper: TimerReaper | None = None,
        incarnation: str | None = None,
        budget: ServerBudget | None = None,
        metrics: PurgatoryMetrics | None = None,
        traced: bool = False,
    ) -> None:
        self.name = settings.name
        # The event stream's id (see .incarnation): given for a durable purgatory, whose
        # sequences survive restarts; fresh for an in-memory one, whose sequences do not.
        self.incarnation = incarnation if incarnation is not None else new_incarnation()
        # Observability (docs/observability.md); None/False: off.
        self.metrics = metrics
        self._traced = traced
        self.settings = settings
        self._limits = limits
        self.account = (budget if budget is not None else ServerBudget(limits)).account(self.name)
        self._time: Time = time if time is not None else SYSTEM_TIME
        self._journal: JournalHooks = journal if journal is not None else NULL_HOOKS
        # Durable purgatories only (None in memory: nothing to wait for): RPCs await
        # ``barrier()`` before they answer. (Outcomes wait for the journal in the feed.)
        self.barrier = None if journal is None else journal.barrier
        timer = SystemTimer(
            settings.name,
            tick_ms=settings.tick_ms,
            wheel_size=settings.wheel_size,
            time=self._time,
            inline_expiry=True,  # expiries only put into inboxes
            reaper=reaper,  # the server's one reaper thread and executor (None: its own)
        )
        self._engine: DelayedOperationPurgatory[RemoteOperation] = DelayedOperationPurgatory(
            settings.name,
            timer=timer,
            purge_interval=settings.purge_interval,
            reaper_enabled=reaper_enabled,
            time=self._time,
            shards=WATCH_SHARDS,
            reaper=reaper,
        )
        self._loop = loop
        log = event_log if event_log is not None else EventLog(settings.retained_events)
        # Worker groups: competing consumers of this purgatory's outcomes; the feed offers
        # them every outcome, the table asks them for capacity.
        self.groups = GroupSet(
            self.name,
            limits,
            loop,
            timer=timer,
            clock=self._time,
            log=log,
            write=None if journal is None else journal.on_group,
            after_write=None if journal is None else journal.after_write,
        )
        # The one owner of this purgatory's outcomes (public: long-polls wait on it).
        self.feed = Feed(
            settings.name,
            log,
            journal,
            loop,
            groups=self.groups,
            buffers=self.account.budget,
            max_subscribers=limits.max_subscribers,
            subscriber_buffer=limits.subscriber_buffer,
            subscriber_buffer_bytes=limits.subscriber_buffer_bytes,
        )
        self._values = LatestValues(limits.max_tracked_values, self._engine.is_watched)
        # Ended operations -> feed -> listeners (the table retires them first); see
        # .publisher for the loop thread's list and the timer threads' inbox.
        publisher: Publisher[RemoteOperation] = Publisher(self.feed, loop)
        self._publisher = publisher
        # Publish what ended so far (this call's completions included) at once.
        self._settle = publisher.settle
        self._slot = SignalSlot(self._time, publisher.put)
        self._table = OperationTable(
            settings,
            limits,
            budget=self.account,
            values=self._values,
            slot=self._slot,
            groups=self.groups,
        )
        publisher.add_listener(self._table.retire)
        self.account.hold(self.feed.log, self._table)  # the budget's retained pool
        if metrics is not None:
            publisher.add_listener(lambda ops, _outcomes: metrics.on_outcomes(ops))
        self._active = self._table.pending  # pending operations by id (the table's)
        self._closed: ServiceError | None = None
        self._deadlines = Deadlines(self.name, timer, self._time, self._journal, metrics)
        # Recurring schedules (see schedules.table), created on first use.
        self._schedules: ScheduleTable | None = None

    # ----------------------------------------------------------------- introspection
    @property
    def engine(self) -> DelayedOperationPurgatory[RemoteOperation]:
        return self._engine

    @property
    def values(self) -> LatestValues:
        return self._values

    @property
    def journal(self) -> JournalHooks:
        return self._journal

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def schedules(self) -> ScheduleTable | None:
        """The schedule table, or None while no schedule was ever set here."""
        return self._schedules

    def schedule_table(self) -> ScheduleTable:
        """The schedule table, created on first use; it hears every ended batch."""
        table = self._schedules
        if table is None:
            table = self._schedules = ScheduleTable(self, self._loop)
            self._publisher.add_listener(table.on_ended)
        return table

    def pending_operations(self) -> list[RemoteOperation]:
        """The pending operations now (a copy; loop thread)."""
        return list(self._active.values())

    def gauges(self) -> Gauges:
        """Figures for exporters, from their own thread (see :class:`.snapshots.Gauges`)."""
        return Gauges.read(self._active, self._engine, self.feed, self._table.finished)

    def stats(self) -> PurgatoryStats:
        """GetPurgatory's figures (loop thread)."""
        return PurgatoryStats.read(
            self.settings, self._active, self._engine, self.feed, self.incarnation
        )

    @property
    def last_sequence(self) -> int:
        """The sequence of the last outcome published here."""
        return self.feed.last_sequence

    @property
    def subscriber_count(self) -> int:
        return self.feed.subscriber_count

    def wall_clock_ms(self) -> int:
        """The server's wall clock as this purgatory reads it (absolute due times)."""
        return self._time.wall_clock_ms()

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    # ----------------------------------------------------------------- operations
    def register(
        self, requests: Sequence[OperationRequest], fields: Sequence[str]
    ) -> list[Registration]:
        """Kafka's tryCompleteElseWatch for each request, all or nothing.

        ``fields`` names each request's place in the RPC ("" or "operations[3].") for
        error messages. Every check runs before the first registration, so a failed batch
        leaves nothing behind.
        """
        self._check_open()
        self._settle()  # expiries the reaper handed over go out before more intake
        plan = self._table.plan(requests, fields)  # every check; nothing changed yet
        journal = self._journal
        on_registered = None if journal is NULL_HOOKS else journal.on_registered
        # A pending re-send whose definition debounces pushes its deadline (.deadlines).
        out, created = self._table.admit(requests, plan, on_registered, self._deadlines.push_back)
        if self._traced and created:
            # The registering request's W3C trace context travels with the outcome.
            traceparent = current_traceparent()
            for op, _ in created:
                op.traceparent = traceparent
        metrics = self.metrics
        if metrics is not None:
            metrics.registered += len(created)
            metrics.batch_register.record(len(requests))
        # One engine call for the batch. An operation its progress does not satisfy yet is
        # watched and armed without Kafka's try/watch/try: those tries close a race with a
        # signal between try and watch, and there is none here (signals run only on the
        # loop thread).
        if any(op.progress.satisfied() for op, _ in created):
            self._engine.try_complete_else_watch_all(created)
        elif created:
            self._engine.watch_and_arm_all(created)
        ended = self._settle()
        if ended:
            by_id = {o.operation_id: o for o in ended}
            out = [(resolve(t, by_id), c) for t, c in out]
        return out

    def signal(self, signals: Sequence[tuple[str, SignalRecord]]) -> list[int]:
        """Record each signal on its key and try the key's watchers; completed per signal."""
        self._check_open()
        slot = self._slot
        engine = self._engine
        journal = self._journal
        on_signal = None if journal is NULL_HOOKS else journal.on_signal
        name = self.name
        self._settle()  # expiries the reaper handed over go out before more intake
        check_data_room(self.account, signals, self._engine.watchers)  # (.signal_data)
        counts: list[int] = []
        # Operations with ``match`` wait on match keys (.match_index): empty, no signal
        # pays for them.
        matches = self._table.matches if self._table.matching else None
        for key, sig in signals:
            if on_signal is not None:
                on_signal(name, key, sig)
            if sig.value is not None:
                self._values.update(key, sig.value)
            count = slot.deliver(key, sig, engine.check_and_complete)
            if matches is not None and sig.attributes is not None:
                for target in matches.targets(key, sig.attributes):
                    count += slot.deliver_to(key, target, sig, engine.check_and_complete)
            counts.append(count)
        self._settle()
        metrics = self.metrics
        if metrics is not None:
            metrics.signals += len(signals)
            metrics.batch_signal.record(len(signals))
        return counts

    def force_complete(self, op_id: str) -> tuple[bool, Target]:
        """End ``op_id`` as FORCE_COMPLETED; (whether this call ended it, its outcome)."""
        self._check_open()
        op = self._active.get(op_id)
        if op is None:
            return False, self._table.lookup(op_id)
        won = op.end(OperationState.FORCE_COMPLETED)
        ended = self._settle()
        return won, resolve(op, {o.operation_id: o for o in ended})

    def cancel(
        self, ids: Sequence[str] = (), *, key: str | None = None, prefix: str | None = None
    ) -> list[Outcome]:
        """End pending operations as CANCELLED; the outcomes of those this call ended.

        By ids (unknown or already ended ids are skipped), by key (the engine's
        ``cancel_for_key``: one watch list) or by id prefix (a scan of the pending table,
        O(pending)). The outcomes are published (sequenced) before this returns.
        """
        self._check_open()
        if key is not None:
            targets = self._engine.cancel_for_key(key)
            for match_key in self._table.matches.keys_of(key):  # (.match_index)
                targets.extend(self._engine.cancel_for_key(match_key))
        elif prefix is not None:
            targets = [op for i, op in self._active.items() if i.startswith(prefix)]
        else:
            targets = [op for op in map(self._active.get, ids) if op is not None]
        won = [op.operation_id for op in targets if op.end(OperationState.CANCELLED)]
        by_id = {o.operation_id: o for o in self._settle()}
        return [by_id[op_id] for op_id in won]

    def reschedule(
        self, op_id: str, timeout_ms: int | None, due_time_ms: int | None
    ) -> RemoteOperation:
        """Move a pending operation's deadline (relative ``timeout_ms`` or absolute
        ``due_time_ms`` on the wall clock); journaled. FailedPrecondition once it ended."""
        self._check_open()
        op = self._active.get(op_id)
        ended = FailedPrecondition(
            f"operation {quote(op_id)} in purgatory {self.name!r} has already ended"
        )
        if op is None:
            self.lookup(op_id)  # NotFound for an unknown id
            raise ended
        moved = self._deadlines.reschedule(op, timeout_ms, due_time_ms)
        self._settle()
        if not moved:
            raise ended
        return op

    def operations_view(self) -> OperationsView:
        """This purgatory's tables for one ListOperations page (:mod:`.listing`)."""
        self._check_open()
        self._settle()  # operations that ended are listed as ended
        return self._table.view(self._engine.watchers)

    def lookup(self, op_id: str) -> Target:
        """The pending operation or, once published, its outcome; NotFound if unknown."""
        self._check_open()
        return self._table.lookup(op_id)

    def restore_operations(self, items: Sequence[RestoredOperation]) -> None:
        """Re-arm operations recovered from the journal (start-up, before serving).

        No journal records are written; progress is rebuilt by replaying their signals;
        each fires at its original due time (wall clock), at once if it has passed.
        """
        self._check_open()
        waiting, satisfied = self._table.restore(items, self._time.wall_clock_ms())
        # Not serving yet: nothing can signal a key meanwhile, so an unsatisfied one needs
        # no try.
        self._engine.watch_and_arm_all(waiting)
        if satisfied:
            self._engine.try_complete_else_watch_all(satisfied)
            self._publisher.settle_soon()  # once the recovery is done, as a reaper's would be

    def restore_finished(self, definition: OperationDefinition, outcome: Outcome) -> None:
        """Remember a journaled outcome so re-sends of its id stay idempotent (start-up)."""
        self._table.remember(definition, outcome)

    def restore_value(self, key: str, value: int) -> None:
        """Set a key's latest value from the journal (start-up, before restoring ops)."""
        self._values.update(key, value)

    def advance_clock(self, timeout_ms: int) -> None:
        """Drive the timer by hand (a MockTime purgatory without reaper); then publish.

        Expired operations run on this thread (``inline_expiry``), ones already due when
        armed on the executor; this waits for it to go idle too so that, with MockTime,
        "everything due has fired and been published" on return.
        """
        self._engine.advance_clock(timeout_ms)
        timer = self._engine.timer
        if isinstance(timer, SystemTimer):
            timer._wait_executor_idle(10.0)
        self._settle()
        self.groups.drain()

    # ----------------------------------------------------------------- waiting for outcomes
    def attach(self, operation_id: str, waiter: Waiter) -> None:
        """Hand ``waiter`` the outcome of pending ``operation_id`` once it is delivered."""
        self.feed.attach(operation_id, waiter)

    def detach(self, operation_id: str, waiter: Waiter) -> None:
        """Stop waiting (the caller went away); the operation stays as it is."""
        self.feed.detach(operation_id, waiter)

    def wait_one(self, op: RemoteOperation) -> Awaitable[Outcome]:
        """The outcome of pending ``op`` once delivered (see :meth:`.Feed.wait_one`)."""
        return self.feed.wait_one(op)

    def wait_all(self, ops: Sequence[RemoteOperation]) -> Awaitable[dict[str, Outcome]]:
        """The outcomes of pending ``ops`` by id, once all are delivered."""
        return self.feed.wait_all(ops)

    # ----------------------------------------------------------------- streams, life cycle
    def subscribe(self, after_sequence: int | None, event_filter: EventFilter) -> Subscriber:
        """A subscriber replaying what is retained after ``after_sequence``, then live."""
        self._check_open()
        self._settle()  # so "from now on" starts after everything already ended
        return self.feed.subscribe(after_sequence, event_filter)

    def unsubscribe(self, sub: Subscriber) -> None:
        self.feed.unsubscribe(sub)

    def cancel_all(self) -> int:
        """End every pending operation as CANCELLED (DeletePurgatory); returns how many."""
        if self._schedules is not None:
            self._schedules.stop()
        cancelled = sum(op.end(OperationState.CANCELLED) for op in list(self._active.values()))
        self._settle()
        return cancelled

    def close(self, error: ServiceError) -> None:
        """Refuse further calls with ``error``; fail waiters; end subscriber streams.

        Does not stop the engine threads: call :meth:`shutdown_engine` (blocking, so
        from a worker thread) afterwards.
        """
        if self._closed is None:
            self._closed = error
        self._settle()
        self.feed.close(error)
        self.groups.close(error)

    def shutdown_engine(self) -> None:
        """Stop the reaper and timer threads (joins them; any thread)."""
        self._engine.shutdown()
        logger.debug("purgatory %s stopped with %d pending", self.name, len(self._active))
