"""A lease's expiry (or the end of a retry wait) as a task on the purgatory's timing wheel.

Why the wheel and not ``loop.call_later``: leases follow the purgatory's clock (MockTime
and ``advance_clock`` drive them like operation timeouts) and cost what timeouts cost.

The task runs on the timer's executor thread, where it must not touch the group: it only
puts itself in the group set's :class:`~purgatory_server._service.outcomes.inbox.Inbox`, and the
loop thread expires the lease from there (if it is still the entry's current lease: an
ack or an extension may have won the race, see :mod:`.entry`).
"""

from __future__ import annotations

from collections.abc import Callable

from purgatory_server._engine.timer_task import TimerTask

__all__ = ["LeaseTask"]


class LeaseTask(TimerTask):
    """Fires ``expired(self)`` (any thread) when the lease's (or the wait's) time is up."""

    __slots__ = ("_expired", "group", "sequence")

    def __init__(
        self, delay_ms: int, group: str, sequence: int, expired: Callable[[LeaseTask], None]
    ) -> None:
        super().__init__(delay_ms)
        self.group = group
        self.sequence = sequence
        self._expired = expired

    def run(self) -> None:
        self._expired(self)
