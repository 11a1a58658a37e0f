"""A pending operation's deadline moves: by Reschedule, or pushed back by a re-send.

Both moves go through :meth:`RemoteOperation.reschedule` (atomic against expiry: an
operation that ended meanwhile is not moved, and Reschedule answers FAILED_PRECONDITION),
are journaled (``JournalHooks.on_rescheduled``, so they survive a restart) and counted.
:class:`Deadlines` does both for one purgatory; loop-confined like it.

Debounce: an operation registered with ``extend_on_resend`` moves its deadline to
*now + timeout_ms* each time its id is registered again (same definition) while pending;
``max_extend_ms`` (0: none) caps it at ``create_time_ms + max_extend_ms``, so re-sends
cannot keep it alive forever. The policy is fixed at creation and journaled with the
registration: a re-send's options are not part of the definition that must match, so the
same request always gets the same behaviour. A re-send only ever pushes a deadline later,
never earlier (an explicit Reschedule may have moved it further; the cap then stops
further pushes).

Only relative timeouts debounce: an absolute ``due_time_ms`` does not move when re-sent,
so asking for both is INVALID_ARGUMENT, as is a cap shorter than the timeout (the first
deadline would already break it) or longer than the server's ``max_timeout_ms``.
"""

from __future__ import annotations

from purgatory_server._engine.time import Time
from purgatory_server._engine.timer import Timer
from purgatory_server._service.core.journal_hooks import JournalHooks
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.telemetry.counters import PurgatoryMetrics

__all__ = ["Deadlines", "extended_due", "push_back"]


class Deadlines:
    """Moves the deadlines of one purgatory's pending operations (loop thread)."""

    __slots__ = ("_journal", "_metrics", "_name", "_time", "_timer")

    def __init__(
        self,
        name: str,
        timer: Timer,
        time: Time,
        journal: JournalHooks,
        metrics: PurgatoryMetrics | None,
    ) -> None:
        self._name = name
        self._timer = timer
        self._time = time
        self._journal = journal
        self._metrics = metrics

    def reschedule(
        self, op: RemoteOperation, timeout_ms: int | None, due_time_ms: int | None
    ) -> bool:
        """Move ``op``'s deadline to now + ``timeout_ms`` or to ``due_time_ms`` (wall
        clock); journaled. False if it ended first (nothing moved)."""
        now = self._time.wall_clock_ms()
        due = now + (timeout_ms or 0) if due_time_ms is None else due_time_ms
        if not op.reschedule(self._timer, max(0, due - now), due):
            return False
        self._journal.on_rescheduled(self._name, op.operation_id, due)
        if self._metrics is not None:
            self._metrics.rescheduled += 1
        return True

    def push_back(self, op: RemoteOperation) -> None:
        """Debounce a re-send of pending ``op`` (its definition asked for it); journaled."""
        if push_back(op, self._timer, self._time.wall_clock_ms()):
            self._journal.on_rescheduled(self._name, op.operation_id, op.due_time_ms)
            if self._metrics is not None:
                self._metrics.extended += 1


def push_back(op: RemoteOperation, timer: Timer, now_ms: int) -> bool:
    """Debounce a re-send of pending ``op`` at ``now_ms``: move its deadline later (never
    earlier) through the atomic reschedule path; True if it moved (the caller journals)."""
    due = extended_due(op.definition, op.create_time_ms, now_ms)
    return due > op.due_time_ms and op.reschedule(timer, due - now_ms, due)


def extended_due(definition: OperationDefinition, create_time_ms: int, now_ms: int) -> int:
    """The deadline a re-send at ``now_ms`` asks for (wall-clock epoch ms), capped."""
    due = now_ms + definition.timeout_ms
    if definition.max_extend_ms:
        due = min(due, create_time_ms + definition.max_extend_ms)
    return due
