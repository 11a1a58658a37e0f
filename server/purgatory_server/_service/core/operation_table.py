"""The operations of one purgatory by id: the pending ones and a memory of finished ones.

Idempotent re-sends: an id finds its pending operation, or its outcome while the dedup
window (:class:`~.finished_ids.FinishedIds`) remembers it; a re-send with a different
definition is ALREADY_EXISTS. The table is a :class:`~.budget.Reclaimable`, so the
retained pool may shorten the window. Capacity is checked all or nothing per batch,
before anything is created: ``max_pending``, then the purgatory's share of the memory
budget (:class:`~.budget.Account`).

Thread safety: loop-confined (see :mod:`.named_purgatory`).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Hashable, Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.budget import Account
from purgatory_server._service.core.finished_ids import FinishedIds
from purgatory_server._service.core.latest_values import LatestValues
from purgatory_server._service.core.listing import OperationsView
from purgatory_server._service.core.match_index import MatchIndex
from purgatory_server._service.core.operation import RemoteOperation, SignalSlot
from purgatory_server._service.core.progress import FirstSignal, Gated, Progress, make_progress
from purgatory_server._service.core.signal_data import DataLink
from purgatory_server._service.core.sorted_ids import SortedIds
from purgatory_server._service.model.conditions import (
    DEFAULT_CONDITION,
    ConditionKind,
    ConditionSpec,
)
from purgatory_server._service.model.definitions import (
    OperationDefinition,
    OperationRequest,
    Recovered,
    RestoredOperation,
)
from purgatory_server._service.model.errors import (
    AlreadyExists,
    InvalidArgument,
    LimitExceeded,
    NotFound,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.quoting import quote
from purgatory_server._service.model.sizes import operation_bytes

if TYPE_CHECKING:
    from purgatory_server._service.groups import GroupSet

__all__ = ["OperationTable", "Registration", "Target", "resolve"]

# The live operation, or the outcome of an ended one.
Target = RemoteOperation | Outcome
# A registration's target, and whether this call created it.
Registration = tuple[Target, bool]
_ANY_KEY = ConditionKind.ANY_KEY
_DEFINITION = attrgetter("definition")
# Ended ids the listing index may hold beyond as many as are pending, and the fewest
# created ids it collects between two listings before it is dropped (:meth:`view`).
STALE_SLACK = 4096

# An operation and the keys it watches, as the engine's batch calls take them.
Armed = tuple[RemoteOperation, tuple[Hashable, ...]]


class OperationTable:
    """Pending operations and recently finished outcomes by id (loop-confined)."""

    __slots__ = (
        "_budget",
        "_data_root",
        "_finished_bytes",
        "_groups",
        "_id_prefix",
        "_ids",
        "_limits",
        "_max_pending",
        "_slot",
        "_unindexed",
        "_unindexed_limit",
        "_unsignalled",
        "finished",
        "matches",
        "matching",
        "name",
        "pending",
        "pending_ids",
        "values",
    )

    def __init__(
        self,
        settings: PurgatorySettings,
        limits: Limits,
        *,
        budget: Account,
        values: LatestValues,
        slot: SignalSlot,
        groups: GroupSet | None = None,
    ) -> None:
        self.name = settings.name
        self.pending: dict[str, RemoteOperation] = {}
        # Finished ids -> (definition, outcome), oldest first: the dedup window.
        self.finished = FinishedIds(settings.dedup_window_ms, settings.dedup_max_bytes)
        self._limits = limits
        self._max_pending = settings.max_pending
        self._budget = budget
        self._finished_bytes = 0  # what the finished memory holds (the retained pool)
        self._data_root = DataLink.root(budget)  # accumulated signal data (.signal_data)
        self.values = values
        self._slot = slot
        self._id_prefix = secrets.token_hex(4) + "-"
        self._unsignalled = make_progress(
            ConditionSpec(),
            (),
            {},
            data_limit=limits.max_result_data_bytes,
            sources_limit=limits.max_result_sources,
        )
        self._ids = itertools.count(1)
        # Pending ids in order, for ListOperations (:mod:`.listing`): built by the first
        # listing (a purgatory never listed pays nothing) and brought up to date by the
        # next (:meth:`view`), so an operation pays one append, not two sorted updates.
        # Invariant while it exists: every pending id is in it or in ``_unindexed``; it
        # may still hold ids that have ended since (a listing skips those).
        self.pending_ids: SortedIds | None = None
        # Ids created since the index was last brought up to date; None without an index.
        # Past ``_unindexed_limit`` the index is dropped (the next listing builds it
        # again), so a purgatory listed once and never again holds no growing list.
        self._unindexed: list[str] | None = None
        self._unindexed_limit = 0
        # Worker groups refuse new registrations while one is full (capacity).
        self._groups = groups
        # Pending operations whose condition has ``match``, by key (.match_index), and
        # how many there are (0: retire skips them).
        self.matches = MatchIndex()
        self.matching = 0

    def __len__(self) -> int:
        return len(self.pending)

    def view(self, watchers: Callable[[str], list[RemoteOperation]]) -> OperationsView:
        """The tables one ListOperations page reads (:mod:`.listing`), with the ordered
        index of pending ids up to date: built when there is none, else the ids created
        since the last listing that are still pending are added to it. Ended ids are
        left in it until they outnumber the pending ones, then it is built anew (each
        build is paid for by as many ends as the index holds ids)."""
        pending = self.pending
        index = self.pending_ids
        unindexed = self._unindexed
        if index is not None and unindexed is not None:
            for op_id in unindexed:
                if op_id in pending:
                    index.add(op_id)
            unindexed.clear()
            # Every pending id is in the index now: the rest of it has ended.
            if len(index) - len(pending) > len(pending) + STALE_SLACK:
                index = None
        if index is None:
            index = self.pending_ids = SortedIds(pending)
            self._unindexed = []
        self._unindexed_limit = max(STALE_SLACK, 2 * len(pending))
        return OperationsView(index, pending, self.finished, watchers)

    # ----------------------------------------------------------------- lookups
    def find(self, op_id: str) -> tuple[OperationDefinition, Target] | None:
        op = self.pending.get(op_id)
        if op is not None:
            return op.definition, op
        return self.finished.get(op_id)

    def lookup(self, op_id: str) -> Target:
        found = self.find(op_id)
        if found is None:
            raise self.not_found(op_id)
        return found[1]

    def not_found(self, op_id: str) -> NotFound:
        return NotFound(
            f"operation {quote(op_id)} not found in purgatory {self.name!r}", "operation", op_id
        )

    # ----------------------------------------------------------------- registration
    def plan(
        self, requests: Sequence[OperationRequest], fields: Sequence[str]
    ) -> list[Registration | str]:
        """Per request, the id to create or the existing target; all checks, no change.

        Capacity for the new ones is reserved in the budget on success (the caller
        creates them). ``fields[i]`` is read only for an error message (it may be built
        lazily: FieldPrefixes).
        """
        if len(fields) != len(requests):
            raise ValueError("one field name per request")
        plan: list[Registration | str] = []
        new = 0
        new_bytes = 0
        seen: set[str] = set()
        for i, req in enumerate(requests):
            op_id = req.operation_id
            definition = req.definition
            if not op_id:
                plan.append(f"{self._id_prefix}{next(self._ids)}")
                new += 1
                new_bytes += len(definition.payload)
                continue
            if op_id in seen:
                raise InvalidArgument(
                    f"{fields[i]}operation_id", f"{quote(op_id)} repeated in the batch"
                )
            seen.add(op_id)
            existing = self.find(op_id)
            if existing is None:
                plan.append(op_id)
                new += 1
                new_bytes += len(definition.payload)
                continue
            known, target = existing
            if known != definition:
                raise AlreadyExists(
                    f"{fields[i]}operation_id: {quote(op_id)} already exists in purgatory "
                    f"{self.name!r} with a different definition"
                )
            plan.append((target, False))
        if new:
            if new > self._max_pending:
                # Never fits, whatever the load: invalid, not capacity that frees up (a
                # client retrying RESOURCE_EXHAUSTED would retry it for ever).
                raise InvalidArgument(
                    _batch_field(fields),
                    f"{new} new operations in one request can never fit purgatory "
                    f"{self.name!r}: max_pending is {self._max_pending} (send smaller batches)",
                )
            # Recovered operations are pending too: a restart that brought back more
            # than max_pending keeps them all and refuses new ones until enough end.
            pending = len(self.pending)
            if pending + new > self._max_pending:
                raise LimitExceeded(
                    f"purgatory {self.name!r} has {pending} pending operations; "
                    f"max_pending is {self._max_pending}"
                )
            groups = self._groups
            if groups:
                groups.check_capacity()
            held = sum(  # the bytes the new operations hold (.sizes)
                operation_bytes(step, r.definition)
                for r, step in zip(requests, plan, strict=True)
                if isinstance(step, str)
            )
            self._budget.reserve(new, new_bytes, held, _batch_field(fields))
        return plan

    def admit(
        self,
        requests: Sequence[OperationRequest],
        plan: Sequence[Registration | str],
        on_registered: Callable[[str, RemoteOperation], None] | None,
        on_resent: Callable[[RemoteOperation], None],
    ) -> tuple[list[Registration], list[Armed]]:
        """Carry out :meth:`plan`: create each planned operation (``on_registered`` before
        it is armed) and answer each re-send with its target (``on_resent`` for a pending
        one that debounces); (the registrations, the created operations to arm)."""
        create = self.create
        name = self.name
        out: list[Registration] = []
        created: list[Armed] = []
        for req, step in zip(requests, plan, strict=True):
            if isinstance(step, str):
                definition = req.definition
                op = create(step, definition)
                if on_registered is not None:
                    on_registered(name, op)
                condition = definition.condition
                if condition is DEFAULT_CONDITION or condition.gate is None:
                    created.append((op, definition.keys))
                else:
                    created.append((op, self._watched(op)))
                out.append((op, True))
            else:
                resent = step[0]
                if isinstance(resent, RemoteOperation) and resent.definition.extend_on_resend:
                    on_resent(resent)
                out.append(step)
        return out, created

    def create(
        self, op_id: str, definition: OperationDefinition, recovered: Recovered | None = None
    ) -> RemoteOperation:
        """A new pending operation, tracked (its capacity already reserved or restored).

        The one creation path, for a live registration and for one ``recovered`` from the
        journal: then its progress is rebuilt by replaying its signals and its clock
        readings (created, due) are the journaled ones.
        """
        progress = self._new_progress(op_id, definition)
        restored = None
        if recovered is not None:
            for key, sig in recovered.signals:
                progress = progress.add(key, sig)  # (a shared FirstSignal is replaced)
            restored = (recovered.create_time_ms, recovered.due_time_ms, recovered.now_ms)
        op = RemoteOperation(
            op_id,
            definition,
            progress,
            slot=self._slot,
            restored=restored,
        )
        self.pending[op_id] = op
        unindexed = self._unindexed
        if unindexed is not None:
            if len(unindexed) < self._unindexed_limit:
                unindexed.append(op_id)
            else:  # no listing for a long while: drop the index (the next builds it)
                self.pending_ids = self._unindexed = None
        return op

    def restore(
        self, items: Iterable[RestoredOperation], now_ms: int
    ) -> tuple[list[Armed], list[Armed]]:
        """Recreate operations recovered from the journal through :meth:`create`
        (start-up): (those still waiting, those their replayed progress satisfies)."""
        waiting: list[Armed] = []
        satisfied: list[Armed] = []
        restored = self._budget.restored
        for op_id, definition, created, due, signals in items:
            restored(len(definition.payload), operation_bytes(op_id, definition))
            op = self.create(op_id, definition, Recovered(created, due, signals, now_ms))
            keys = definition.keys if definition.condition.gate is None else self._watched(op)
            (satisfied if op.progress.satisfied() else waiting).append((op, keys))
        return waiting, satisfied

    def _watched(self, op: RemoteOperation) -> tuple[Hashable, ...]:
        """What a new operation with a gate watches: its keys, or with ``match`` its
        match keys (counted in the index until :meth:`retire`)."""
        definition = op.definition
        gate = definition.condition.gate
        if gate is None or not gate.match:
            return definition.keys
        value = _match_value(op)
        self.matching += 1
        return self.matches.add(definition.keys, gate.match, value)

    def _new_progress(
        self, op_id: str, definition: OperationDefinition
    ) -> Progress | FirstSignal | Gated:
        """Fresh progress for a new or recovered operation; VALUES_AT_LEAST starts from the
        latest values known, since a value signalled before registration counts."""
        cond = definition.condition
        if cond is DEFAULT_CONDITION:  # the shared unsignalled progress (make_progress's)
            return self._unsignalled
        if cond.kind is _ANY_KEY and cond.gate is None:
            return self._unsignalled
        keys = definition.keys
        known = self.values.known(keys) if cond.kind is ConditionKind.VALUES_AT_LEAST else {}
        limits = self._limits
        return make_progress(
            cond,
            keys,
            known,
            data_limit=limits.max_result_data_bytes,
            sources_limit=limits.max_result_sources,
            data_root=self._data_root,
            operation_id=op_id,
        )

    # ----------------------------------------------------------------- retirement
    def retire(self, ops: Sequence[RemoteOperation], outcomes: Sequence[Outcome]) -> None:
        """Ended operations leave the pending table; their outcomes are remembered.

        Once per published batch: the budget is released and the dedup window trimmed
        once for the batch, not per operation.
        """
        pending = self.pending
        traces = self._slot.traces  # (RemoteOperation.traceparent)
        matching = self.matching
        released = released_payload = released_bytes = 0
        for op in ops:
            op_id = op.operation_id
            if pending.get(op_id) is op:
                del pending[op_id]  # (the listing index keeps it until rebuilt: view)
                if traces:
                    traces.pop(op_id, None)
                released += 1
                definition = op.definition
                released_payload += len(definition.payload)
                released_bytes += operation_bytes(op_id, definition)
                if matching:
                    gate = definition.condition.gate
                    if gate is not None and gate.match:
                        self.matches.remove(definition.keys, gate.match, _match_value(op))
                        self.matching -= 1
        if released:
            self._budget.release_many(released, released_payload, released_bytes)
        finished = self.finished
        if finished.enabled:
            finished.add_many(zip(map(_DEFINITION, ops), outcomes, strict=True))
            finished.trim()
            self._charge_finished()

    def remember(self, definition: OperationDefinition, outcome: Outcome) -> None:
        """Keep a finished id's outcome so re-sends of it stay idempotent (start-up: the
        journal's; the window and the byte cap apply as for live ones)."""
        self.finished.add(definition, outcome)
        self.finished.trim()
        self._charge_finished()

    def _charge_finished(self) -> None:
        """Charge the dedup window's change in size to the budget's retained pool (which
        may make the table shed). The charged figure is updated first: retaining may call
        :meth:`shed` back."""
        delta = self.finished.bytes - self._finished_bytes
        if delta:
            self._finished_bytes = self.finished.bytes
            self._budget.retain(delta)

    @property  # the memory budget's Reclaimable
    def retained_bytes(self) -> int:
        return self._finished_bytes

    def shed(self) -> int:
        """Forget the oldest remembered id because the retained pool needs room."""
        freed = self.finished.pop_oldest()
        self._finished_bytes -= freed
        return freed


def resolve(target: Target, ended: dict[str, Outcome]) -> Target:
    """``target``'s outcome if it is among those just published (by id), else ``target``."""
    if isinstance(target, Outcome):  # (a tuple check: RemoteOperation is an ABC)
        return target
    return ended.get(target.operation_id, target)


def _match_value(op: RemoteOperation) -> str:
    """The canonical value of a match operation's own attribute (validation checked that
    it has one)."""
    gate = op.definition.condition.gate
    attributes = None if gate is None else gate.attributes
    value = (
        None
        if attributes is None or gate is None
        else attributes.canonical_at(tuple(gate.match.split(".")))
    )
    return "null" if value is None else value


def _batch_field(fields: Sequence[str]) -> str:
    """The request field a whole batch came in ("operations" of "operations[3]."), or
    "operation" for a single registration (whose prefix is empty)."""
    first = fields[0] if fields else ""
    return first.split("[", 1)[0] or "operation"
