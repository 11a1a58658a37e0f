"""What a purgatory tells its journal: the protocol the core calls, and the in-memory
default that records nothing. A durable store (``durable.local_store``, the cluster's
replicated store) implements it; the core never imports one.

Called on the event loop thread, in this order per operation: ``on_registered`` before
the operation is armed, ``on_signal`` before a signal is delivered, ``on_rescheduled``
when its deadline moved, ``on_outcome`` when the outcome has its sequence (before
waiters and subscribers see it; with the definition, so a journal need not keep one per
pending operation). ``on_group`` records a worker group's change (a ready-made record,
``groups.records``); ``on_schedule_upserted`` and ``on_schedule_deleted`` a schedule's.
Hooks are synchronous and quick: a durable implementation buffers and group-commits on
its own thread. An exception from a hook propagates to the RPC that caused it, so a
journal that cannot write fails loudly instead of losing records.

Durability contract: ``barrier()`` completes once everything recorded so far is written
under the fsync policy, and a durable purgatory's RPC handlers await it before
answering; ``after_write(callback, failed)`` runs ``callback`` on the loop once
everything recorded so far is written (the feed delivers outcomes then) or, if that
write fails, ``failed(exc)`` instead: exactly one of the two, unless the loop is gone.
An in-memory purgatory has no barrier and its feed delivers at once.

``no_space`` says why the journal cannot write for now (out of disk space: it retries by
itself, and what was recorded waits, in order), None while it writes: the edge then
refuses writes before they change anything and answers reads from memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from purgatory_proto.v1.journal_pb2 import JournalRecord

    from purgatory_server._service.core.operation import RemoteOperation
    from purgatory_server._service.model.conditions import SignalRecord
    from purgatory_server._service.model.definitions import OperationDefinition
    from purgatory_server._service.model.outcome import Outcome
    from purgatory_server._service.schedules.definition import ScheduleDefinition

__all__ = ["NULL_HOOKS", "JournalHooks", "NullHooks"]


class JournalHooks(Protocol):
    @property
    def no_space(self) -> str | None: ...

    def on_registered(self, purgatory: str, operation: RemoteOperation) -> None: ...

    def on_signal(self, purgatory: str, key: str, signal: SignalRecord) -> None: ...

    def on_outcome(
        self, purgatory: str, outcome: Outcome, definition: OperationDefinition
    ) -> None: ...

    def on_rescheduled(self, purgatory: str, operation_id: str, due_time_ms: int) -> None: ...
    def on_group(self, record: JournalRecord) -> None: ...

    def on_schedule_upserted(
        self, purgatory: str, definition: ScheduleDefinition, now_ms: int
    ) -> None: ...

    def on_schedule_deleted(self, purgatory: str, schedule_id: str, now_ms: int) -> None: ...

    async def barrier(self) -> None: ...

    def after_write(
        self, callback: Callable[[], None], failed: Callable[[BaseException], None]
    ) -> None: ...


class NullHooks:
    """In-memory purgatories: nothing is recorded."""

    __slots__ = ()

    @property
    def no_space(self) -> str | None:
        return None

    def on_registered(self, purgatory: str, operation: RemoteOperation) -> None:
        return None

    def on_signal(self, purgatory: str, key: str, signal: SignalRecord) -> None:
        return None

    def on_outcome(self, purgatory: str, outcome: Outcome, definition: OperationDefinition) -> None:
        return None

    def on_rescheduled(self, purgatory: str, operation_id: str, due_time_ms: int) -> None:
        return None

    def on_schedule_upserted(
        self, purgatory: str, definition: ScheduleDefinition, now_ms: int
    ) -> None:
        return None

    def on_schedule_deleted(self, purgatory: str, schedule_id: str, now_ms: int) -> None:
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
