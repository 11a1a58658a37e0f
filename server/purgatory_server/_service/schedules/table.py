"""The schedules of one purgatory and the one armed occurrence each keeps.

Schedules need no timer of their own: a schedule's next firing *is* an ordinary
operation of its purgatory, the "occurrence", with the deterministic id
``<schedule_id>@<fire time ms>``, due at its fire time. Its outcome (EXPIRED, or earlier
by signals) is published like any other, then :meth:`ScheduleTable.on_ended` arms the
next one. A durable purgatory journals it like any operation, so after a restart it is
recovered, re-armed and adopted back by its schedule (:meth:`resume`). Invariants:

- a schedule has at most one armed occurrence, and ``_ticks`` maps exactly the armed
  occurrence ids back to their schedules;
- fire times only move forward: the next occurrence fires strictly after both the
  previous fire time and the moment it is armed, which is the catch-up policy (after
  downtime: the missed occurrence fires once, at once; the other missed times are
  skipped);
- an occurrence id is used at most once (it has exactly one outcome): a fire time whose
  id was already used is skipped.

Thread safety: loop-confined like its purgatory. :meth:`on_ended` runs inside the
purgatory's publish step; arming there registers an operation, which may publish again
(re-entrant, and safe because the table's state is updated before each registration).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from purgatory_server._service.model.definitions import OperationRequest
from purgatory_server._service.model.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    ServiceError,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.quoting import quote
from purgatory_server._service.schedules.definition import (
    ScheduleDefinition,
    describe,
    occurrence_id,
    parse_occurrence_id,
)
from purgatory_server._service.schedules.timing import CronError

if TYPE_CHECKING:
    from purgatory_server._service.model.ended import Ended

__all__ = ["MAX_SCHEDULES", "ScheduleEntry", "ScheduleHost", "ScheduleTable"]

logger = logging.getLogger("purgatory_server.service")

# Schedules per purgatory. Capacity (RESOURCE_EXHAUSTED): deleting one frees a place.
MAX_SCHEDULES = 1_000
# Fire times tried per arming when their ids are already used (then: retry later).
_MAX_SKIPS = 64
# Seconds before retrying to arm occurrences that could not be armed (a full purgatory).
RETRY_S = 1.0


@dataclass(slots=True)
class ScheduleEntry:
    """One schedule: its definition and its armed occurrence ("" when none)."""

    definition: ScheduleDefinition
    update_time_ms: int
    occurrence_id: str = ""
    # The armed occurrence's fire time, or the last one armed while none is.
    fire_time_ms: int = 0


class ScheduleJournal(Protocol):
    """The part of the purgatory's journal hooks that schedules call."""

    def on_schedule_upserted(
        self, purgatory: str, definition: ScheduleDefinition, now_ms: int
    ) -> None: ...

    def on_schedule_deleted(self, purgatory: str, schedule_id: str, now_ms: int) -> None: ...


class Occurrence(Protocol):
    """A registered occurrence that may still be pending."""

    def is_completed(self) -> bool: ...


class ScheduleHost(Protocol):
    """What a schedule table needs of its purgatory (a NamedPurgatory, which owns the
    table: this keeps the schedules package free of an import of the purgatory)."""

    @property
    def name(self) -> str: ...

    @property
    def journal(self) -> ScheduleJournal: ...

    def wall_clock_ms(self) -> int: ...

    def register(
        self, requests: Sequence[OperationRequest], fields: Sequence[str]
    ) -> Sequence[tuple[Occurrence | Outcome, bool]]: ...

    def cancel(self, ids: Sequence[str] = ()) -> list[Outcome]: ...


class ScheduleTable:
    """Schedule id -> :class:`ScheduleEntry` for one purgatory (loop-confined).

    Built by its purgatory on first use (``NamedPurgatory.schedule_table``), which then
    calls :meth:`on_ended` after every published batch.
    """

    def __init__(self, purgatory: ScheduleHost, loop: asyncio.AbstractEventLoop) -> None:
        self._purgatory = purgatory
        self._loop = loop
        self._entries: dict[str, ScheduleEntry] = {}
        self._ticks: dict[str, str] = {}  # armed occurrence id -> schedule id
        self._stopped = False
        self._retry: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def armed(self) -> int:
        """Schedules with an armed occurrence (fewer than ``len`` while a full purgatory
        refuses one: the ``purgatory.schedules`` gauge's ``armed`` figure)."""
        return len(self._ticks)

    def entries(self) -> list[ScheduleEntry]:
        return [self._entries[k] for k in sorted(self._entries)]

    # ----------------------------------------------------------------- RPCs
    def upsert(self, definition: ScheduleDefinition) -> tuple[ScheduleEntry, bool, bool]:
        """Create or replace a schedule; (entry, created, changed).

        All or nothing: the new occurrence is registered before anything else changes,
        so a refusal (a full purgatory) leaves the old schedule as it was. The armed
        occurrence is kept when the new definition fires first at the very same time
        (it keeps the template it was armed with); otherwise it ends CANCELLED.
        """
        purgatory = self._purgatory
        sid = definition.schedule_id
        old = self._entries.get(sid)
        if old is not None and old.definition == definition:
            return old, False, False
        if old is None and len(self._entries) >= MAX_SCHEDULES:
            raise LimitExceeded(
                f"purgatory {purgatory.name!r} has {len(self._entries)} schedules; "
                f"the most is {MAX_SCHEDULES}"
            )
        now = purgatory.wall_clock_ms()
        entry = ScheduleEntry(definition, now)
        try:
            first = definition.next_fire(now)
        except CronError as exc:
            raise InvalidArgument("schedule.cron", str(exc)) from exc
        if old is not None and old.occurrence_id and old.fire_time_ms == first:
            entry.occurrence_id, entry.fire_time_ms = old.occurrence_id, old.fire_time_ms
        else:
            # Registering publishes what already ended: if that is the old occurrence, its
            # end must not arm another one for the old definition, so unmap it first.
            if old is not None and old.occurrence_id:
                self._ticks.pop(old.occurrence_id, None)
            try:
                # May adopt the old occurrence itself (a later fire time with the same
                # template), which then must not be cancelled below.
                self._arm(entry, now)
            except (ServiceError, CronError) as exc:
                # Refused before registering (so before publishing): nothing changed.
                if old is not None and old.occurrence_id:
                    self._ticks[old.occurrence_id] = sid
                if isinstance(exc, CronError):
                    raise InvalidArgument("schedule.cron", str(exc)) from exc
                raise
        purgatory.journal.on_schedule_upserted(purgatory.name, definition, now)
        self._entries[sid] = entry
        if old is not None and old.occurrence_id and old.occurrence_id != entry.occurrence_id:
            self._disarm(old)
        if entry.occurrence_id:
            self._ticks[entry.occurrence_id] = sid
        return entry, old is None, True

    def delete(self, schedule_id: str) -> Outcome | None:
        """Forget a schedule; its armed occurrence ends CANCELLED (returned if it did)."""
        purgatory = self._purgatory
        entry = self._entries.get(schedule_id)
        if entry is None:
            raise NotFound(
                f"schedule {quote(schedule_id)} not found in purgatory {purgatory.name!r}",
                "schedule",
                schedule_id,
            )
        now = purgatory.wall_clock_ms()
        purgatory.journal.on_schedule_deleted(purgatory.name, schedule_id, now)
        del self._entries[schedule_id]
        return self._disarm(entry)

    # ----------------------------------------------------------------- arming
    def _disarm(self, entry: ScheduleEntry) -> Outcome | None:
        op_id = entry.occurrence_id
        if not op_id:
            return None
        entry.occurrence_id = ""
        if self._ticks.get(op_id) == entry.definition.schedule_id:
            del self._ticks[op_id]  # first, so its CANCELLED outcome arms nothing
        ended = self._purgatory.cancel((op_id,))
        return ended[0] if ended else None

    def _arm(self, entry: ScheduleEntry, after_ms: int) -> None:
        """Register ``entry``'s next occurrence after ``after_ms`` (raises ServiceError).

        Sets ``entry.occurrence_id``/``fire_time_ms``; the caller maps it in ``_ticks``
        (before anything can end it: registration publishes only what already ended).
        """
        definition = entry.definition
        fire = definition.next_fire(after_ms)
        for _ in range(_MAX_SKIPS):
            op_id = occurrence_id(definition.schedule_id, fire)
            request = OperationRequest(op_id, definition.occurrence(fire))
            try:
                ((target, _created),) = self._purgatory.register((request,), ("schedule.",))
            except AlreadyExists:
                target = None  # the id was used by another definition: skip this time
            ended = target is None or isinstance(target, Outcome) or target.is_completed()
            if not ended:
                entry.occurrence_id, entry.fire_time_ms = op_id, fire
                return
            # Already ended (used before a restart or a replacement): skip this time.
            fire = definition.next_fire(fire)
        raise FailedPrecondition(
            f"schedule {quote(definition.schedule_id)}: the ids of its next {_MAX_SKIPS} "
            "fire times are all used"
        )

    def _rearm(self, entry: ScheduleEntry, after_ms: int) -> None:
        """Arm the next occurrence; if the purgatory is full, log it and try again later.

        Any other refusal means the purgatory is closing (server shutdown, or deleted):
        nothing is armed, and a durable schedule arms again when the server restarts.
        """
        try:
            self._arm(entry, after_ms)
        except LimitExceeded as exc:
            if self._stopped:
                return
            logger.warning(
                "purgatory %s: schedule %s (%s) not armed: %s; retrying in %.0fs",
                self._purgatory.name,
                entry.definition.schedule_id,
                describe(entry.definition),
                exc.message,
                RETRY_S,
            )
            if self._retry is None:
                self._retry = self._loop.call_later(RETRY_S, self._arm_missing)
            return
        except ServiceError as exc:
            logger.info(
                "purgatory %s: schedule %s not armed: %s",
                self._purgatory.name,
                entry.definition.schedule_id,
                exc.message,
            )
            return
        except CronError as exc:  # validated on upsert; never expected here
            logger.error(
                "purgatory %s: schedule %s has no next fire time: %s",
                self._purgatory.name,
                entry.definition.schedule_id,
                exc,
            )
            return
        self._ticks[entry.occurrence_id] = entry.definition.schedule_id

    def _arm_missing(self) -> None:
        self._retry = None
        if self._stopped:
            return
        now = self._purgatory.wall_clock_ms()
        for entry in list(self._entries.values()):
            if not entry.occurrence_id and self._entries.get(entry.definition.schedule_id) is entry:
                self._rearm(entry, max(now, entry.fire_time_ms))

    def on_ended(self, ops: Sequence[Ended], outcomes: Sequence[Outcome] = ()) -> None:
        """The purgatory published these outcomes: arm the next occurrence of each
        schedule whose armed occurrence is among them (a listener of its publisher)."""
        ticks = self._ticks
        for op in ops:
            sid = ticks.pop(op.operation_id, None)
            if sid is None:
                continue
            entry = self._entries.get(sid)
            if entry is None or entry.occurrence_id != op.operation_id:
                continue
            entry.occurrence_id = ""
            if self._stopped:
                continue
            # Strictly after the fire time just used and after now: catch-up fires once.
            now = self._purgatory.wall_clock_ms()
            self._rearm(entry, max(now, entry.fire_time_ms))

    # ----------------------------------------------------------------- life cycle
    def stop(self) -> None:
        """The purgatory is being deleted: arm nothing more."""
        self._stopped = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    def restore(self, definition: ScheduleDefinition, update_time_ms: int) -> None:
        """A journaled schedule (start-up, before the pending operations are restored)."""
        self._entries[definition.schedule_id] = ScheduleEntry(definition, update_time_ms)

    def resume(self, pending_ids: Iterable[str]) -> None:
        """Adopt the recovered occurrences, then arm one for each schedule without.

        Start-up, after the pending operations were restored: an occurrence that fell due
        during the downtime has been handed to the timer already and ends soon after;
        adopting it first makes its end arm the next one (catch-up: once). A schedule with
        no pending occurrence (a crash between an outcome and the next registration)
        arms its first fire time after now.
        """
        for op_id in pending_ids:
            parsed = parse_occurrence_id(op_id)
            if parsed is None:
                continue
            entry = self._entries.get(parsed[0])
            if entry is None or (entry.occurrence_id and parsed[1] <= entry.fire_time_ms):
                continue
            if entry.occurrence_id:
                self._ticks.pop(entry.occurrence_id, None)
            entry.occurrence_id, entry.fire_time_ms = op_id, parsed[1]
            self._ticks[op_id] = parsed[0]
        now = self._purgatory.wall_clock_ms()
        for entry in self._entries.values():
            if not entry.occurrence_id:
                self._rearm(entry, now)
