"""NamedPurgatory: one named purgatory of the service.

It wraps the engine's :class:`DelayedOperationPurgatory` with what a network service
needs around it: the table of operations by id (for idempotent re-sends, ForceComplete
and GetOperation), a bounded memory of recently finished ids, the latest value per key,
the outcome sequence and retained window, subscribers, and the journal hooks.

Thread safety (the central contract): a NamedPurgatory is **loop-confined**. Every public
method must be called on the event loop thread it was created on. The only code that runs
elsewhere is ``RemoteOperation.on_complete`` on the timer's executor thread, and that
only touches its own operation and the thread-safe :class:`Inbox`; the loop publishes
outcomes from there in batches. Public methods that can complete operations drain the
inbox before returning, so their callers see those outcomes (with sequences) at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from purgatory_server._engine.purgatory import DelayedOperationPurgatory
from purgatory_server._engine.system_timer import SystemTimer
from purgatory_server._engine.time import SYSTEM_TIME, Time
from purgatory_server._service.budget import ServerBudget
from purgatory_server._service.conditions import (
    ConditionKind,
    FirstSignal,
    Progress,
    SignalRecord,
    make_progress,
)
from purgatory_server._service.config import Limits, PurgatorySettings
from purgatory_server._service.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    ServiceError,
)
from purgatory_server._service.events import EventLog, Outcome
from purgatory_server._service.inbox import Inbox
from purgatory_server._service.incarnation import new_incarnation
from purgatory_server._service.journal import NULL_JOURNAL, Journal
from purgatory_server._service.operation import (
    OperationDefinition,
    RemoteOperation,
    RestoredOperation,
    SignalSlot,
)
from purgatory_server._service.quoting import quote
from purgatory_server._service.states import OperationState
from purgatory_server._service.subscriptions import EventFilter, Subscriber
from purgatory_server._service.telemetry.context import current_traceparent
from purgatory_server._service.telemetry.counters import PurgatoryMetrics
from purgatory_server._service.values import LatestValues
from purgatory_server._service.waiters import Waiter

__all__ = ["NamedPurgatory", "OperationRequest", "PurgatoryStats", "Registration"]

logger = logging.getLogger("purgatory_server.service")

# A registration's target: the live operation, or the outcome of a finished one.
Registration = tuple[RemoteOperation | Outcome, bool]


@dataclass(frozen=True, slots=True)
class OperationRequest:
    """A validated request to register one operation ("" id: the server assigns one)."""

    operation_id: str
    definition: OperationDefinition


@dataclass(frozen=True, slots=True)
class PurgatoryStats:
    name: str
    settings: PurgatorySettings
    pending: int
    watched_keys: int
    last_sequence: int
    oldest_sequence: int
    subscribers: int
    incarnation: str = ""


class NamedPurgatory:
    """The service-side state of one purgatory; loop-confined (see module docstring)."""

    def __init__(
        self,
        settings: PurgatorySettings,
        limits: Limits,
        loop: asyncio.AbstractEventLoop,
        *,
        time: Time | None = None,
        journal: Journal | None = None,
        event_log: EventLog | None = None,
        reaper_enabled: bool = True,
        incarnation: str | None = None,
        budget: ServerBudget | None = None,
        metrics: PurgatoryMetrics | None = None,
        traced: bool = False,
    ) -> None:
        self.name = settings.name
        # The event stream's id (see .incarnation): given for a durable purgatory, whose
        # sequences survive restarts; fresh for an in-memory one, whose sequences do not.
        self.incarnation = incarnation if incarnation is not None else new_incarnation()
        # Observability (docs/observability.md): None/False cost one check per call.
        self.metrics = metrics
        self._traced = traced
        self.settings = settings
        self._limits = limits
        # Server-wide capacity shared with the other purgatories (a private one if alone).
        self._budget = budget if budget is not None else ServerBudget(limits)
        self._time: Time = time if time is not None else SYSTEM_TIME
        self._journal: Journal = journal if journal is not None else NULL_JOURNAL
        # Durable purgatories only (None in memory): RPCs await ``barrier()`` before they
        # answer, and outcomes reach waiters and subscribers once journaled.
        self.barrier: Callable[[], Awaitable[None]] | None = (
            None if journal is None else journal.barrier
        )
        timer = SystemTimer(
            settings.name, tick_ms=settings.tick_ms, wheel_size=settings.wheel_size, time=self._time
        )
        self._engine: DelayedOperationPurgatory[RemoteOperation] = DelayedOperationPurgatory(
            settings.name,
            timer=timer,
            purge_interval=settings.purge_interval,
            reaper_enabled=reaper_enabled,
            time=self._time,
        )
        self._log = event_log if event_log is not None else EventLog(settings.retained_events)
        self._delivered = self._log.last_sequence  # durable: last outcome offered to anyone
        self._active: dict[str, RemoteOperation] = {}
        # Recently finished ids -> (definition, outcome), oldest first, bounded.
        self._finished: OrderedDict[str, tuple[OperationDefinition, Outcome]] = OrderedDict()
        self._values = LatestValues(limits.max_tracked_values)
        self._subscribers: list[Subscriber] = []
        self._slot = SignalSlot()
        self._inbox: Inbox[RemoteOperation] = Inbox(loop, self._publish)
        self._id_prefix = secrets.token_hex(4) + "-"
        self._ids = itertools.count(1)
        self._closed: ServiceError | None = None

    # ----------------------------------------------------------------- introspection
    @property
    def engine(self) -> DelayedOperationPurgatory[RemoteOperation]:
        return self._engine

    @property
    def event_log(self) -> EventLog:
        return self._log

    @property
    def values(self) -> LatestValues:
        return self._values

    def gauges(self) -> tuple[int, int, int, int, int]:
        """(pending, watched keys, timer size, subscribers, retained events) for exporters.

        Called from an exporter's thread: each figure is one GIL-atomic read (``len``, an
        int) or the engine's own thread-safe count, so no lock is taken on the loop's
        behalf; the figures are each exact but not one consistent snapshot.
        """
        engine = self._engine
        return (
            len(self._active),
            engine.watched_keys(),
            engine.num_delayed(),
            len(self._subscribers),
            len(self._log),
        )

    @property
    def last_sequence(self) -> int:
        return self._log.last_sequence

    def stats(self) -> PurgatoryStats:
        return PurgatoryStats(
            name=self.name,
            settings=self.settings,
            pending=len(self._active),
            watched_keys=self._engine.watched_keys(),
            last_sequence=self._log.last_sequence,
            oldest_sequence=self._log.oldest_sequence,
            subscribers=len(self._subscribers),
            incarnation=self.incarnation,
        )

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
        plan: list[Registration | str] = []
        new = 0
        new_bytes = 0
        seen: set[str] = set()
        if len(fields) != len(requests):
            raise ValueError("one field name per request")
        # fields[i] is looked up only for an error: it may be built lazily (FieldPrefixes).
        for i, req in enumerate(requests):
            op_id = req.operation_id
            if not op_id:
                plan.append(f"{self._id_prefix}{next(self._ids)}")
                new += 1
                new_bytes += len(req.definition.payload)
                continue
            if op_id in seen:
                raise InvalidArgument(
                    f"{fields[i]}operation_id", f"{quote(op_id)} repeated in the batch"
                )
            seen.add(op_id)
            existing = self._find(op_id)
            if existing is None:
                plan.append(op_id)
                new += 1
                new_bytes += len(req.definition.payload)
                continue
            definition, target = existing
            if definition != req.definition:
                raise AlreadyExists(
                    f"{fields[i]}operation_id: {quote(op_id)} already exists in purgatory "
                    f"{self.name!r} with a different definition"
                )
            plan.append((target, False))
        if new:
            # Recovered operations are in _active too: a restart that brought back more
            # than max_pending keeps them all and refuses new ones until enough end.
            if len(self._active) + new > self.settings.max_pending:
                raise LimitExceeded(
                    f"purgatory {self.name!r} has {len(self._active)} pending operations; "
                    f"max_pending is {self.settings.max_pending}"
                )
            self._budget.reserve(new, new_bytes)
        out: list[Registration] = []
        created: list[tuple[RemoteOperation, tuple[str, ...]]] = []
        for req, step in zip(requests, plan, strict=True):
            if isinstance(step, str):
                op = self._create(step, req.definition)
                created.append((op, op.keys))
                out.append((op, True))
            else:
                out.append(step)
        if self._traced and created:
            # The registering request's W3C trace context travels with the outcome.
            traceparent = current_traceparent()
            for op, _ in created:
                op.traceparent = traceparent
        metrics = self.metrics
        if metrics is not None:
            metrics.registered += len(created)
            metrics.batch_register.record(len(requests))
        # One engine call for the batch: Kafka's steps per operation, one timer round.
        self._engine.try_complete_else_watch_all(created)
        self._inbox.drain()
        return out

    def _find(self, op_id: str) -> tuple[OperationDefinition, RemoteOperation | Outcome] | None:
        op = self._active.get(op_id)
        if op is not None:
            return op.definition, (op.outcome or op)
        return self._finished.get(op_id)

    def _new_progress(self, definition: OperationDefinition) -> Progress | FirstSignal:
        """Fresh progress for a new or recovered operation.

        ANY_KEY (the default) gets the light FirstSignal. VALUES_AT_LEAST starts from the
        latest values already known, because a value signalled before registration counts.
        """
        cond = definition.condition
        keys = definition.keys
        known = self._values.known(keys) if cond.kind is ConditionKind.VALUES_AT_LEAST else {}
        return make_progress(
            cond,
            keys,
            known,
            data_limit=self._limits.max_result_data_bytes,
            sources_limit=self._limits.max_result_sources,
        )

    def _create(self, op_id: str, definition: OperationDefinition) -> RemoteOperation:
        """A new operation, tracked and journaled; the caller hands it to the engine."""
        keys = definition.keys
        progress = self._new_progress(definition)
        op = RemoteOperation(
            op_id, definition, progress, slot=self._slot, clock=self._time, on_end=self._inbox.put
        )
        self._active[op_id] = op
        self._values.watch(keys)
        self._journal.on_registered(self.name, op)
        return op

    def signal(self, signals: Sequence[tuple[str, SignalRecord]]) -> list[int]:
        """Record each signal on its key and try the key's watchers; completed per signal."""
        self._check_open()
        slot = self._slot
        engine = self._engine
        journal = self._journal
        counts: list[int] = []
        for key, sig in signals:
            journal.on_signal(self.name, key, sig)
            if sig.value is not None:
                self._values.update(key, sig.value)
            slot.serial += 1
            slot.key = key
            slot.signal = sig
            try:
                counts.append(engine.check_and_complete(key))
            finally:
                slot.key = None
                slot.signal = None
        self._inbox.drain()
        metrics = self.metrics
        if metrics is not None:
            metrics.signals += len(signals)
            metrics.batch_signal.record(len(signals))
        return counts

    def force_complete(self, op_id: str) -> tuple[bool, RemoteOperation | Outcome]:
        self._check_open()
        op = self._active.get(op_id)
        if op is None:
            finished = self._finished.get(op_id)
            if finished is None:
                raise NotFound(
                    f"operation {quote(op_id)} not found in purgatory {self.name!r}",
                    "operation",
                    op_id,
                )
            return False, finished[1]
        won = op.end(OperationState.FORCE_COMPLETED)
        self._inbox.drain()
        return won, (op.outcome or op)

    def cancel(
        self, ids: Sequence[str] = (), *, key: str | None = None, prefix: str | None = None
    ) -> list[RemoteOperation]:
        """End pending operations as CANCELLED; the ones this call ended (idempotent).

        By ids (unknown or already ended ids are skipped), by key (the engine's
        ``cancel_for_key``: one watch list) or by id prefix (a scan of the pending table,
        O(pending)). The outcomes are published (sequenced) before this returns.
        """
        self._check_open()
        if key is not None:
            targets = self._engine.cancel_for_key(key)
        elif prefix is not None:
            targets = [op for i, op in self._active.items() if i.startswith(prefix)]
        else:
            targets = [op for op in map(self._active.get, ids) if op is not None]
        ended = [op for op in targets if op.end(OperationState.CANCELLED)]
        self._inbox.drain()
        return ended

    def reschedule(
        self, op_id: str, timeout_ms: int | None, due_time_ms: int | None
    ) -> RemoteOperation:
        """Move a pending operation's deadline (relative ``timeout_ms`` or absolute
        ``due_time_ms`` on the wall clock); journaled. FailedPrecondition once it ended."""
        self._check_open()
        op = self._active.get(op_id)
        if op is None:
            self.lookup(op_id)  # NotFound for an unknown id
            raise FailedPrecondition(
                f"operation {quote(op_id)} in purgatory {self.name!r} has already ended"
            )
        now = self._time.wall_clock_ms()
        if due_time_ms is None:
            delay = timeout_ms or 0
            due = now + delay
        else:
            due = due_time_ms
            delay = max(0, due - now)
        if not op.reschedule(self._engine.timer, delay, due):
            self._inbox.drain()
            raise FailedPrecondition(
                f"operation {quote(op_id)} in purgatory {self.name!r} has already ended"
            )
        self._journal.on_rescheduled(self.name, op_id, due)
        self._inbox.drain()
        return op

    def lookup(self, op_id: str) -> RemoteOperation | Outcome:
        self._check_open()
        found = self._find(op_id)
        if found is None:
            raise NotFound(
                f"operation {quote(op_id)} not found in purgatory {self.name!r}",
                "operation",
                op_id,
            )
        return found[1]

    def restore_operation(
        self,
        op_id: str,
        definition: OperationDefinition,
        create_time_ms: int,
        due_time_ms: int,
        signals: Sequence[tuple[str, SignalRecord]],
    ) -> None:
        """Re-arm one operation recovered from the journal; see :meth:`restore_operations`."""
        self.restore_operations([(op_id, definition, create_time_ms, due_time_ms, signals)])

    def restore_operations(self, items: Sequence[RestoredOperation]) -> None:
        """Re-arm operations recovered from the journal (start-up, before serving).

        Progress is rebuilt by replaying each one's signals; its timer fires at the original
        ``due_time_ms`` (wall clock, read once for the batch), at once if that has passed.
        The batch is armed in one engine call (one timer lock round). Nothing is
        journaled: the operations are already in the journal.
        """
        self._check_open()
        now_ms = self._time.wall_clock_ms()
        slot, clock, on_end = self._slot, self._time, self._inbox.put
        active, watch, restored = self._active, self._values.watch, self._budget.restored
        waiting: list[tuple[RemoteOperation, tuple[str, ...]]] = []
        satisfied: list[tuple[RemoteOperation, tuple[str, ...]]] = []
        for op_id, definition, created, due, signals in items:
            progress = self._new_progress(definition)
            for key, sig in signals:
                progress = progress.add(key, sig)
            times = (created, due, now_ms)
            op = RemoteOperation(
                op_id, definition, progress, slot=slot, clock=clock, on_end=on_end, restored=times
            )
            active[op_id] = op
            restored(len(definition.payload))
            watch(definition.keys)
            (satisfied if progress.satisfied() else waiting).append((op, definition.keys))
        # Not serving yet: nothing can signal a key meanwhile, so an operation whose
        # replayed progress does not satisfy it needs no try (the engine's restart path).
        self._engine.watch_and_arm_all(waiting)
        if satisfied:
            self._engine.try_complete_else_watch_all(satisfied)

    def restore_finished(self, definition: OperationDefinition, outcome: Outcome) -> None:
        """Remember a journaled outcome so re-sends of its id stay idempotent (start-up)."""
        if self._limits.finished_retained:
            self._finished[outcome.operation_id] = (definition, outcome)
            if len(self._finished) > self._limits.finished_retained:
                self._finished.popitem(last=False)

    def restore_value(self, key: str, value: int) -> None:
        """Set a key's latest value from the journal (start-up, before restoring ops)."""
        self._values.update(key, value)

    def advance_clock(self, timeout_ms: int) -> None:
        """Drive the timer by hand (a MockTime purgatory without reaper); then publish.

        Expired operations run on the executor thread; this waits for it to go idle so
        that, with MockTime, "everything due has fired and been published" on return.
        """
        self._engine.advance_clock(timeout_ms)
        timer = self._engine.timer
        if isinstance(timer, SystemTimer):
            timer._wait_executor_idle(10.0)
        self._inbox.drain()

    # ----------------------------------------------------------------- outcomes
    def _publish(self, ops: list[RemoteOperation]) -> None:
        """Give each ended operation its sequence and tell everyone (loop thread)."""
        log = self._log
        active = self._active
        finished = self._finished
        retained = self._limits.finished_retained
        journal = self._journal
        budget = self._budget
        deferred: list[tuple[Outcome, list[Waiter]]] | None = None if self.barrier is None else []
        for op in ops:
            outcome = Outcome(
                sequence=log.next_sequence(),
                purgatory=self.name,
                operation_id=op.operation_id,
                state=op.state,
                keys=op.keys,
                payload=op.definition.payload,
                result=op.result,
                create_time_ms=op.create_time_ms,
                due_time_ms=op.due_time_ms,
                complete_time_ms=op.complete_time_ms,
                traceparent=op.traceparent,
            )
            op.outcome = outcome
            if active.get(op.operation_id) is op:
                del active[op.operation_id]
                budget.release(len(op.definition.payload))
            if retained:
                finished[op.operation_id] = (op.definition, outcome)
                if len(finished) > retained:
                    finished.popitem(last=False)
            self._values.unwatch(op.keys)
            log.append(outcome)
            journal.on_outcome(self.name, outcome)
            if deferred is not None:
                deferred.append((outcome, op.waiters))
                op.waiters = []
                continue
            for sub in self._subscribers:
                sub.offer(outcome)
            waiters = op.waiters
            if waiters:
                op.waiters = []
                for waiter in waiters:
                    waiter.deliver(outcome)
        if deferred:
            journal.after_write(lambda: self._deliver_durable(deferred))
        if self.metrics is not None:
            self.metrics.on_outcomes(ops)

    def _deliver_durable(self, deferred: list[tuple[Outcome, list[Waiter]]]) -> None:
        """The second half of :meth:`_publish` for a durable purgatory, run once the
        outcomes are journaled: nobody sees an outcome a crash could still take back."""
        for outcome, waiters in deferred:
            self._delivered = outcome.sequence
            for sub in self._subscribers:
                if outcome.sequence > sub.start_after:
                    sub.offer(outcome)
            for waiter in waiters:
                waiter.deliver(outcome)

    # ----------------------------------------------------------------- subscriptions
    def subscribe(self, after_sequence: int | None, event_filter: EventFilter) -> Subscriber:
        """A subscriber replaying what is retained after ``after_sequence``, then live."""
        self._check_open()
        if len(self._subscribers) >= self._limits.max_subscribers:
            raise LimitExceeded(
                f"purgatory {self.name!r} has {len(self._subscribers)} subscribers; "
                f"max_subscribers is {self._limits.max_subscribers}"
            )
        self._inbox.drain()  # so "from now on" starts after everything already ended
        # Durable: outcomes not yet journaled are offered live by _deliver_durable.
        last = self._log.last_sequence if self.barrier is None else self._delivered
        if after_sequence is None:
            start, replay = last, []
        else:
            start, replay = after_sequence, self._log.after(after_sequence)
            if last < self._log.last_sequence:
                replay = [o for o in replay if o.sequence <= last]
        sub = Subscriber(event_filter, self._limits.subscriber_buffer, replay, start)
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    # ----------------------------------------------------------------- life cycle
    def cancel_all(self) -> int:
        """End every pending operation as CANCELLED (DeletePurgatory); returns how many."""
        cancelled = sum(op.end(OperationState.CANCELLED) for op in list(self._active.values()))
        self._inbox.drain()
        return cancelled

    def close(self, error: ServiceError) -> None:
        """Refuse further calls with ``error``; fail waiters; end subscriber streams.

        Does not stop the engine threads: call :meth:`shutdown_engine` (blocking, so
        from a worker thread) afterwards.
        """
        if self._closed is None:
            self._closed = error
        self._inbox.drain()
        for op in list(self._active.values()):
            waiters = op.waiters
            op.waiters = []
            for waiter in waiters:
                waiter.fail(error)
        for sub in self._subscribers:
            sub.close(error)

    def shutdown_engine(self) -> None:
        """Stop the reaper and timer threads (joins them; any thread)."""
        self._engine.shutdown()
        logger.debug("purgatory %s stopped with %d pending", self.name, len(self._active))
