"""RemoteOperation: a DelayedOperation whose condition arrives over the wire.

``check_and_complete(key)`` calls ``try_complete()`` without arguments, so the purgatory
puts the signal being delivered in a :class:`SignalSlot` (key, signal, serial) for the
duration of that call; each operation accounts for it once (the serial de-duplicates).
Invariants:

- the slot is written only on the event loop thread, around ``check_and_complete``;
- the engine calls ``try_complete`` only on that thread too; the timer's reaper (or
  executor) thread only calls ``run`` (expiry), which never reads the slot;
- every path that completes an operation holds ``self.lock`` (the purgatory's, shared by
  all its operations), so the reason recorded just before ``force_complete`` is the
  single winner's.

``on_complete`` runs on the winning thread (loop or timer) and never blocks: it freezes
the result and hands the operation to the purgatory's inbox. What follows the end
(sequence, waiters, subscribers) belongs to the loop-thread :class:`~.feed.Feed`; an
operation holds no reference to a caller.

Reschedule and the race with expiry. A TimerTask's cancellation is permanent, so
:meth:`RemoteOperation.reschedule` cancels the operation's timer entry (and any earlier
:class:`_Expiry`) and arms a fresh :class:`_Expiry`; ``self._expiry`` names the one task
allowed to expire it. This happens under ``self.lock``, and every expiry path re-checks
under the same lock:

- the timer is already running the old entry, waiting for the lock while we reschedule:
  once it gets the lock, ``run`` sees ``_expiry`` set and returns, and a stale
  ``_Expiry`` sees it is not the current one and returns. The operation stays pending
  with its new deadline;
- the timer's thread got the lock first: the operation is EXPIRED before reschedule
  looks, and reschedule answers False (FAILED_PRECONDITION at the edge).

Either way exactly one terminal outcome; a lost race is reported, never half-applied.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from purgatory_server._engine.delayed_operation import DelayedOperation
from purgatory_server._engine.time import Time
from purgatory_server._engine.timer import Timer
from purgatory_server._engine.timer_task import TimerTask
from purgatory_server._service.core.progress import FirstSignal, Gated, Progress
from purgatory_server._service.model.conditions import (
    EMPTY_RESULT,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState

__all__ = ["RemoteOperation", "SignalSlot"]

# Enum members as globals: cheaper to read than an Enum class attribute.
_WATCHING = OperationState.WATCHING
_COMPLETED = OperationState.COMPLETED
_EXPIRED = OperationState.EXPIRED


# RemoteOperation's completion flag (see RemoteOperation.force_complete): shared, never
# acquired or released after this.
_PENDING = threading.Lock()
_DONE = threading.Lock()
_DONE.acquire()


class SignalSlot:
    """The signal being delivered by ``check_and_complete`` (loop thread only), and what
    all the purgatory's operations share: its lock (any thread), the clock and where
    ended operations go (``on_end``)."""

    __slots__ = ("clock", "key", "lock", "on_end", "serial", "signal", "traces")

    def __init__(self, clock: Time, on_end: Callable[[RemoteOperation], None]) -> None:
        self.clock = clock
        self.on_end = on_end
        # Pending operation id -> the W3C traceparent of the request that registered it,
        # only for traced registrations (loop thread; the table drops an entry when its
        # operation is retired).
        self.traces: dict[str, str] = {}
        self.key: str | None = None
        self.signal: SignalRecord | None = None
        self.serial = 0
        # One re-entrant lock for all the purgatory's operations. Deadlock-free because
        # every holder is short and takes nothing that waits for another operation's
        # lock: the loop thread holds it around one try_complete / end / reschedule, the
        # timer's executor around one expiry; what they take inside (a watch shard, a
        # timer bucket, the timer, the inbox) is never held while waiting for this lock.
        # Under the GIL sharing costs no parallelism.
        self.lock = threading.RLock()

    def deliver(
        self, key: str, signal: SignalRecord, check_and_complete: Callable[[str], int]
    ) -> int:
        """Have the engine try ``key``'s watchers while this slot holds ``signal``; how
        many completed."""
        self.serial += 1
        self.key = key
        self.signal = signal
        try:
            return check_and_complete(key)
        finally:
            self.key = None
            self.signal = None

    def deliver_to(
        self,
        key: str,
        watched: Hashable,
        signal: SignalRecord,
        check_and_complete: Callable[[Hashable], int],
    ) -> int:
        """:meth:`deliver` to the watchers of ``watched`` (a match key of ``key``, see
        ``core.match_index``): they see the signal as received on ``key``."""
        self.serial += 1
        self.key = key
        self.signal = signal
        try:
            return check_and_complete(watched)
        finally:
            self.key = None
            self.signal = None


class RemoteOperation(DelayedOperation):
    """One operation of a named purgatory; ends exactly once, in one final state."""

    __slots__ = (
        "_due",
        "_expiry",
        "_reason",
        "_seen",
        "_slot",
        "complete_time_ms",
        "create_time_ms",
        "definition",
        "operation_id",
        "progress",
        "result",
        "state",
    )

    def __init__(
        self,
        operation_id: str,
        definition: OperationDefinition,
        progress: Progress | FirstSignal | Gated,
        *,
        slot: SignalSlot,
        restored: tuple[int, int, int] | None = None,
    ) -> None:
        """``restored``: (create_time_ms, due_time_ms, now_ms) of an operation recovered
        from the journal, which keeps its times and fires at its due time (wall clock,
        read once per recovery batch as ``now_ms``), at once if that has passed."""
        super().__init__(definition.timeout_ms, slot.lock, _PENDING)  # see force_complete
        self.operation_id = operation_id
        self.definition = definition
        self.progress = progress
        self._slot = slot
        self._seen = slot.serial  # signals delivered before registration do not count
        self._reason = _EXPIRED  # what ``run`` (the timer) means
        self.state = _WATCHING
        self.result: ResultSnapshot = EMPTY_RESULT
        # ``due_time_ms`` is create_time_ms + timeout_ms unless ``_due`` says otherwise (a
        # caller's due time, a reschedule, a recovered one).
        self._due = 0
        if restored is not None:
            created, due, now_ms = restored
            self.create_time_ms = created
            if due != created + definition.timeout_ms:
                self._due = due
            self.delay_ms = max(0, due - now_ms)
        else:
            self.create_time_ms = slot.clock.wall_clock_ms()
            due = definition.due_time_ms
            if due:
                # Judged on the server's wall clock when it arrives; a past one fires at once.
                self.delay_ms = max(0, due - self.create_time_ms)
                self._due = due
        self.complete_time_ms = 0
        # The task that may expire this operation once it was rescheduled (None: its own
        # timer entry). Written under ``lock`` only.
        self._expiry: _Expiry | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return self.definition.keys

    @property
    def traceparent(self) -> str:
        """The registering request's W3C traceparent ("" untraced; loop thread)."""
        traces = self._slot.traces
        return traces.get(self.operation_id, "") if traces else ""

    @traceparent.setter
    def traceparent(self, traceparent: str) -> None:
        if traceparent:
            self._slot.traces[self.operation_id] = traceparent

    @property
    def due_time_ms(self) -> int:
        """When the operation expires (wall-clock epoch ms)."""
        due = self._due
        return due if due else self.create_time_ms + self.definition.timeout_ms

    @due_time_ms.setter
    def due_time_ms(self, value: int) -> None:
        self._due = value

    def try_complete(self) -> bool:
        # ``is_completed()`` inlined: this runs for every watcher of every signalled key.
        if self._completed.locked():
            return False
        slot = self._slot
        progress = self.progress
        if slot.serial != self._seen:
            self._seen = slot.serial
            key = slot.key
            if key is not None and slot.signal is not None:
                progress = self.progress = progress.add(key, slot.signal)
        if progress.satisfied():
            self._reason = _COMPLETED
            return self.force_complete()
        return False

    def force_complete(self) -> bool:
        """The engine's one-shot completion without a lock per operation.

        ``_completed`` is one of two shared, never-acquired locks: ``_PENDING`` until this
        swaps in ``_DONE`` (locked for good), so ``_completed.locked()`` still answers
        "completed?" for the engine. The check-and-swap is atomic under ``self.lock``,
        which every caller already holds.
        """
        with self.lock:
            if self._completed is _DONE:
                return False
            self._completed = _DONE
        self.cancel()
        watcher = self._watcher
        if watcher is not None:
            watcher.unwatch(self)
        self.on_complete()
        return True

    def end(self, reason: OperationState) -> bool:
        """Force-complete with ``reason`` (FORCE_COMPLETED, CANCELLED); True if this won."""
        with self.lock:
            if self.is_completed():
                return False
            self._reason = reason
            return self.force_complete()

    def reschedule(self, timer: Timer, delay_ms: int, due_time_ms: int) -> bool:
        """Move the deadline to ``delay_ms`` from now; False if the operation already ended.

        Atomic with respect to every way of ending it (see the module docstring): the
        operation never leaves the pending state in between.
        """
        with self.lock:
            if self.is_completed():
                return False
            self.cancel()  # the own entry for good, and the previous _Expiry if any
            task = _Expiry(self, delay_ms)
            self._expiry = task
            self.due_time_ms = due_time_ms
            timer.add(task)
            return True

    def cancel(self) -> None:
        super().cancel()
        expiry = self._expiry
        if expiry is not None:
            expiry.cancel()

    def run(self) -> None:
        # The operation's own timer entry; after a reschedule only _Expiry may expire it.
        with self.lock:
            if self._expiry is None and self.force_complete():
                self.on_expiration()

    def _expire_from(self, task: _Expiry) -> None:
        with self.lock:
            if self._expiry is task and self.force_complete():
                self.on_expiration()

    def on_complete(self) -> None:
        self.state = self._reason
        now = self._slot.clock.wall_clock_ms()
        if self._reason is _EXPIRED and now < self.due_time_ms:
            # The wheel fires on the monotonic clock, ``due_time_ms`` is wall time, so the
            # wall reading can land just before the due time. An expiry is never early:
            # record it at its due time.
            now = self.due_time_ms
        self.complete_time_ms = now
        self.result = self.progress.snapshot()
        self._slot.on_end(self)

    def on_expiration(self) -> None:
        # Already published as EXPIRED by on_complete (the reason ``run`` leaves in place).
        return None

    def __repr__(self) -> str:
        return f"RemoteOperation({self.operation_id!r}, {self.state.name})"


class _Expiry(TimerTask):
    """A rescheduled deadline: a timer task that expires its operation if still current."""

    __slots__ = ("_operation",)

    def __init__(self, operation: RemoteOperation, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._operation = operation

    def run(self) -> None:
        self._operation._expire_from(self)
