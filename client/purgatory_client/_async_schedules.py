"""Recurring schedules' methods of the client (a mix-in; requests and results in
``_schedules``). Semantics: docs/service.md "Recurring schedules"."""

from __future__ import annotations

from collections.abc import Iterable

from purgatory_client import _responses, _schedules
from purgatory_client._base import ClientBase
from purgatory_client._models import Condition, OperationStatus
from purgatory_client._schedules import Schedule, ScheduleUpsert

__all__ = ["AsyncScheduleMethods"]


class AsyncScheduleMethods(ClientBase):
    """Create or replace, delete and list recurring schedules."""

    async def upsert_schedule(
        self,
        schedule_id: str,
        *,
        every_ms: int | None = None,
        cron: str | None = None,
        time_zone: str = "",
        keys: Iterable[str] = (),
        condition: Condition | None = None,
        payload: bytes = b"",
        purgatory: str | None = None,
    ) -> ScheduleUpsert:
        """Create or replace a recurring schedule: every ``every_ms`` (on the epoch grid)
        or at the times a five-field ``cron`` expression names in ``time_zone`` (IANA;
        "" is UTC). Each firing is an operation "<schedule_id>@<fire ms>" due at its fire
        time, watching ``keys`` (``condition`` met early: COMPLETED instead of EXPIRED).
        Re-sending the same definition changes nothing (``changed`` False)."""
        req = _schedules.upsert_schedule_request(
            self._name(purgatory),
            schedule_id,
            every_ms=every_ms,
            cron=cron,
            time_zone=time_zone,
            keys=keys,
            condition=condition,
            payload=payload,
        )
        resp = await self._call(self._stub.UpsertSchedule, req, self.timeout)
        return ScheduleUpsert(
            _schedules.schedule_from_proto(resp.schedule), resp.created, resp.changed
        )

    async def delete_schedule(
        self, schedule_id: str, *, purgatory: str | None = None
    ) -> OperationStatus | None:
        """Delete a schedule (NotFoundError if unknown); returns its armed occurrence,
        now CANCELLED, if one was pending."""
        req = _schedules.delete_schedule_request(self._name(purgatory), schedule_id)
        resp = await self._call(self._stub.DeleteSchedule, req, self.timeout)
        if not resp.HasField("cancelled"):
            return None
        return _responses.status_from_proto(resp.cancelled)

    async def list_schedules(self, *, purgatory: str | None = None) -> list[Schedule]:
        """Every schedule of the purgatory, in id order, with its next occurrence."""
        req = _schedules.list_schedules_request(self._name(purgatory))
        resp = await self._call(self._stub.ListSchedules, req, self.timeout)
        return [_schedules.schedule_from_proto(s) for s in resp.schedules]
