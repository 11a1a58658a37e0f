"""RemoteOperation: a DelayedOperation whose condition arrives over the wire.

How a signal reaches ``try_complete``: the engine's ``check_and_complete(key)`` calls
``try_complete()`` with no arguments on every operation watching ``key``. The purgatory
therefore puts the signal being delivered in a :class:`SignalSlot` (key, signal, serial)
for the duration of that call; each operation accounts for the slot's signal once (the
serial de-duplicates) and then judges its condition. Invariants that make this sound:

- the slot is written only on the event loop thread, around ``check_and_complete``;
- the engine calls ``try_complete`` only on that thread too (registration and signals);
  the timer's executor thread only calls ``run`` (expiry), which never reads the slot;
- every path that completes an operation holds ``self.lock`` (``try_complete`` and
  ``run`` are called with it by the engine, :meth:`end` takes it), so the reason
  recorded just before ``force_complete`` is the reason of the single winner.

``on_complete`` runs on the winning thread (loop or executor): it freezes the result and
hands the operation to the purgatory's inbox, nothing more, so it never blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from purgatory_server._engine.delayed_operation import DelayedOperation
from purgatory_server._engine.time import Time
from purgatory_server._service.conditions import (
    EMPTY_RESULT,
    ConditionSpec,
    FirstSignal,
    Progress,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.states import OperationState

if TYPE_CHECKING:
    from purgatory_server._service.events import Outcome
    from purgatory_server._service.waiters import Waiter

__all__ = ["OperationDefinition", "RemoteOperation", "SignalSlot"]

# Enum members as module constants: a class-attribute lookup on an Enum costs more than
# a global, and these are read once or twice per operation.
_WATCHING = OperationState.WATCHING
_COMPLETED = OperationState.COMPLETED
_EXPIRED = OperationState.EXPIRED


@dataclass(frozen=True, slots=True)
class OperationDefinition:
    """What a caller asked for; equal definitions make a re-send idempotent."""

    keys: tuple[str, ...]
    timeout_ms: int
    condition: ConditionSpec
    payload: bytes


class SignalSlot:
    """The signal currently being delivered by ``check_and_complete`` (loop thread only)."""

    __slots__ = ("key", "serial", "signal")

    def __init__(self) -> None:
        self.key: str | None = None
        self.signal: SignalRecord | None = None
        self.serial = 0


class RemoteOperation(DelayedOperation):
    """One operation of a named purgatory; ends exactly once, in one final state."""

    __slots__ = (
        "_clock",
        "_on_end",
        "_reason",
        "_seen",
        "_slot",
        "complete_time_ms",
        "create_time_ms",
        "definition",
        "due_time_ms",
        "operation_id",
        "outcome",
        "progress",
        "result",
        "state",
        "traceparent",
        "waiters",
    )

    def __init__(
        self,
        operation_id: str,
        definition: OperationDefinition,
        progress: Progress | FirstSignal,
        *,
        slot: SignalSlot,
        clock: Time,
        on_end: Callable[[RemoteOperation], None],
    ) -> None:
        super().__init__(definition.timeout_ms)
        self.operation_id = operation_id
        self.definition = definition
        self.progress = progress
        self._slot = slot
        self._seen = slot.serial  # signals delivered before registration do not count
        self._clock = clock
        self._on_end = on_end
        self._reason = _EXPIRED  # what ``run`` (the timer) means
        self.state = _WATCHING
        self.result: ResultSnapshot = EMPTY_RESULT
        self.create_time_ms = clock.wall_clock_ms()
        self.due_time_ms = self.create_time_ms + definition.timeout_ms
        self.complete_time_ms = 0
        # Set on the loop thread when the outcome is published (sequence assigned).
        self.outcome: Outcome | None = None
        # Long-polls waiting for the outcome; loop thread only.
        self.waiters: list[Waiter] = []
        # The registering request's W3C traceparent when tracing is on (loop thread).
        self.traceparent = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return self.definition.keys

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
                progress.add(key, slot.signal)
        if progress.satisfied():
            self._reason = _COMPLETED
            return self.force_complete()
        return False

    def end(self, reason: OperationState) -> bool:
        """Force-complete with ``reason`` (FORCE_COMPLETED, CANCELLED); True if this won."""
        with self.lock:
            if self.is_completed():
                return False
            self._reason = reason
            return self.force_complete()

    def on_complete(self) -> None:
        self.state = self._reason
        self.complete_time_ms = self._clock.wall_clock_ms()
        self.result = self.progress.snapshot()
        self._on_end(self)

    def on_expiration(self) -> None:
        # Already published as EXPIRED by on_complete (the reason ``run`` leaves in place).
        return None

    def __repr__(self) -> str:
        return f"RemoteOperation({self.operation_id!r}, {self.state.name})"
