"""Hooks a durable journal plugs into; the in-memory default does nothing.

A purgatory calls its journal, on the event loop thread and in this order per
operation: ``on_registered`` before the operation is armed, ``on_signal`` before a signal
is delivered, ``on_rescheduled`` when a pending operation's deadline
moved, ``on_group`` for a worker group's change (a ready-made record, see
:mod:`.groups.records`), ``on_outcome`` when the outcome has its sequence (before waiters and
subscribers see it; it gets the operation's definition too, so a journal need not keep
one per pending operation). Hooks are synchronous and must be quick: a durable implementation
buffers and group-commits on its own thread. An exception from a hook propagates to the
RPC that caused it, so a journal that cannot write fails loudly instead of silently
losing records (a JournalError or OSError from ``barrier()`` is FAILED_PRECONDITION; any
other exception is a bug: INTERNAL, logged by the edge).

Durability contract (a journal that makes acknowledgements durable): ``barrier()``
completes once everything recorded so far is written under the fsync policy, and the
RPC handlers of a purgatory built with a journal await it before answering;
``after_write(callback, failed)`` runs ``callback`` on the loop once everything recorded so
far is written, which is when the feed (:mod:`.feed`) offers outcomes to waiters and
subscribers; if that write fails it runs ``failed(exc)`` instead (exactly one of the two
runs, unless the loop is gone), so the feed can end the calls waiting for those outcomes
rather than leave them waiting for ever. Every outcome takes that path:
:class:`NullHooks` runs the callback at once. Only ``barrier()`` is skipped in memory
(the purgatory keeps ``barrier = None``, so an in-memory RPC answers without awaiting
anything).

To restore after a restart, build the purgatory with the journal's
:class:`~purgatory_server._service.outcomes.event_log.EventLog` (last sequence + retained window).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from purgatory_proto.v1.journal_pb2 import JournalRecord

    from purgatory_server._service.core.conditions import SignalRecord
    from purgatory_server._service.core.operation import OperationDefinition, RemoteOperation
    from purgatory_server._service.outcomes.event_log import Outcome

__all__ = ["NULL_HOOKS", "JournalHooks", "NullHooks"]


class JournalHooks(Protocol):
    def on_registered(self, purgatory: str, operation: RemoteOperation) -> None: ...

    def on_signal(self, purgatory: str, key: str, signal: SignalRecord) -> None: ...

    def on_outcome(
        self, purgatory: str, outcome: Outcome, definition: OperationDefinition
    ) -> None: ...

    def on_rescheduled(self, purgatory: str, operation_id: str, due_time_ms: int) -> None: ...
    def on_group(self, record: JournalRecord) -> None: ...

    # A schedule was upserted or deleted (schedules/definition.py builds the record).
    def on_schedule_change(self, purgatory: str, record: JournalRecord) -> None: ...

    async def barrier(self) -> None: ...

    def after_write(
        self, callback: Callable[[], None], failed: Callable[[BaseException], None]
    ) -> None: ...


class NullHooks:
    """In-memory purgatories: nothing is recorded."""

    __slots__ = ()

    def on_registered(self, purgatory: str, operation: RemoteOperation) -> None:
        return None

    def on_signal(self, purgatory: str, key: str, signal: SignalRecord) -> None:
        return None

    def on_outcome(self, purgatory: str, outcome: Outcome, definition: OperationDefinition) -> None:
        return None

    def on_rescheduled(self, purgatory: str, operation_id: str, due_time_ms: int) -> None:
        return None

    def on_schedule_change(self, purgatory: str, record: JournalRecord) -> None:
        return None

    def on_group(self, record: JournalRecord) -> None:
        return None

    async def barrier(self) -> None:
        return None

    def after_write(
        self, callback: Callable[[], None], failed: Callable[[BaseException], None]
    ) -> None:
        callback()


NULL_HOOKS = NullHooks()
