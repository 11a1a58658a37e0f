"""Delayed messages' methods of the client (a mix-in): cancel and reschedule pending
operations, list and iterate operations with their progress (``_listing``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from purgatory_client import _listing, _requests, _responses
from purgatory_client._base import ClientBase
from purgatory_client._models import OperationState, OperationStatus

__all__ = ["AsyncDelayedMethods"]


class AsyncDelayedMethods(ClientBase):
    """Cancel, reschedule, list and iterate operations."""

    async def cancel(
        self,
        operation_ids: Iterable[str] | None = None,
        *,
        key: str | None = None,
        prefix: str | None = None,
        purgatory: str | None = None,
    ) -> list[OperationStatus]:
        """End pending operations as CANCELLED: by ids, every one watching ``key``, or
        every one whose id starts with ``prefix`` (exactly one). Returns those this call
        ended (each with its outcome's sequence); calling it again returns none."""
        req = _requests.cancel_request(self._name(purgatory), operation_ids, key, prefix)
        resp = await self._call(self._stub.Cancel, req, self.timeout)
        return [_responses.status_from_proto(s) for s in resp.cancelled]

    async def reschedule(
        self,
        operation_id: str,
        *,
        timeout_ms: int | None = None,
        due_time_ms: int | None = None,
        purgatory: str | None = None,
    ) -> OperationStatus:
        """Move a pending operation's deadline (from now, or to an absolute epoch-ms due
        time on the server's clock); FailedPreconditionError once it has ended."""
        req = _requests.reschedule_request(
            self._name(purgatory), operation_id, timeout_ms, due_time_ms
        )
        resp = await self._call(self._stub.Reschedule, req, self.timeout)
        return _responses.status_from_proto(resp.operation)

    async def list_operations(
        self,
        *,
        key: str = "",
        prefix: str = "",
        states: Iterable[OperationState] = (),
        due_after_ms: int = 0,
        due_before_ms: int = 0,
        page_token: str = "",
        page_size: int = 0,
        purgatory: str | None = None,
    ) -> _listing.OperationPage:
        """One page of pending operations (``states`` empty) or recently ended ones, in
        operation id order, each with its progress so far. Filters: ``key`` watched,
        id ``prefix``, ``states``, due time ``due_after_ms <= due < due_before_ms`` (epoch
        ms on the server's clock; 0: no bound). ``page_size`` 0 means the server's
        default (100; at most 1000). Pass ``next_page_token`` back, with the same
        filters, for the next page; a page may be short or empty while it is set."""
        req = _listing.list_request(
            self._name(purgatory),
            key=key,
            prefix=prefix,
            states=states,
            due_after_ms=due_after_ms,
            due_before_ms=due_before_ms,
            page_token=page_token,
            page_size=page_size,
        )
        resp = await self._call(self._stub.ListOperations, req, self.timeout)
        return _listing.page_from_proto(resp, _responses.status_from_proto)

    async def iter_operations(
        self,
        *,
        key: str = "",
        prefix: str = "",
        states: Iterable[OperationState] = (),
        due_after_ms: int = 0,
        due_before_ms: int = 0,
        page_size: int = 0,
        purgatory: str | None = None,
    ) -> AsyncIterator[OperationStatus]:
        """Every operation :meth:`list_operations` selects, page after page. Stable while
        operations come and go: one pending throughout is yielded exactly once."""
        states = tuple(states)
        token = ""
        while True:
            page = await self.list_operations(
                key=key,
                prefix=prefix,
                states=states,
                due_after_ms=due_after_ms,
                due_before_ms=due_before_ms,
                page_token=token,
                page_size=page_size,
                purgatory=purgatory,
            )
            for status in page.operations:
                yield status
            token = page.next_page_token
            if not token:
                return
