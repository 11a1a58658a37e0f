"""Worker-group methods of the asyncio client (a mix-in of :class:`AsyncPurgatoryClient`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import grpc

from purgatory_client import _groups_base as gb
from purgatory_client._base import ResumePolicy
from purgatory_client._session_base import Backoff
from purgatory_client.errors import UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["AsyncGroupMethods"]


class AsyncGroupMethods:
    """Join a worker group, ack, extend leases, list and redrive dead letters."""

    _stub: Any
    _metadata: Any
    _resume: ResumePolicy
    timeout: float | None
    _call: Callable[..., Any]
    _name: Callable[[str | None], str]

    async def join_group(
        self,
        group: str,
        *,
        visibility_timeout_ms: int = 0,
        max_attempts: int = 0,
        prefetch: int = 0,
        purgatory: str | None = None,
        heartbeat_interval_ms: int = 0,
        resume: ResumePolicy | None = None,
    ) -> AsyncIterator[gb.AsyncDelivery]:
        """Deliveries leased to this member of ``group`` (created on first join with
        the given settings; 0: the group's, or the defaults). ``prefetch``: leases held
        at once. A stream dropped by UNAVAILABLE (a server restart) is re-joined under
        the client's ResumePolicy; other errors are raised. Leases
        held when it dropped run out and are redelivered (at-least-once)."""
        req = gb.group_subscribe_request(
            self._name(purgatory),
            group,
            visibility_timeout_ms=visibility_timeout_ms,
            max_attempts=max_attempts,
            prefetch=prefetch,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )
        backoff = Backoff(resume or self._resume)
        while True:
            call = self._stub.Subscribe(req, metadata=with_trace(self._metadata))
            try:
                async for msg in call:
                    if msg.heartbeat:
                        continue
                    backoff.progress()
                    yield gb.delivery_from_proto(msg, self, gb.AsyncDelivery)
                return
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                if not isinstance(error, UnavailableError):
                    raise error from None  # e.g. max_groups: the caller decides
                delay = backoff.delay(error)
            finally:
                call.cancel()
            await asyncio.sleep(delay)

    async def ack(
        self, group: str, sequence: int, *, attempt: int = 0, purgatory: str | None = None
    ) -> None:
        """End a delivery (or discard a dead letter). ``attempt`` 0: whatever delivery
        holds it; else FailedPreconditionError if it was delivered again since."""
        req = gb.ack_request(self._name(purgatory), group, sequence, attempt)
        await self._call(self._stub.Ack, req, self.timeout)

    async def extend_lease(
        self,
        group: str,
        sequence: int,
        attempt: int,
        *,
        visibility_timeout_ms: int = 0,
        purgatory: str | None = None,
    ) -> int:
        req = gb.extend_request(
            self._name(purgatory), group, sequence, attempt, visibility_timeout_ms
        )
        return int((await self._call(self._stub.ExtendLease, req, self.timeout)).lease_deadline_ms)

    async def list_dead_letters(
        self,
        group: str,
        *,
        after_sequence: int = 0,
        page_size: int = 0,
        purgatory: str | None = None,
    ) -> gb.DeadLetterPage:
        req = gb.dead_letters_request(self._name(purgatory), group, after_sequence, page_size)
        resp = await self._call(self._stub.ListDeadLetters, req, self.timeout)
        return gb.DeadLetterPage(
            tuple(gb.delivery_from_proto(m, self, gb.AsyncDelivery) for m in resp.dead_letters),
            resp.next_after_sequence,
        )

    async def redrive(
        self,
        group: str,
        sequences: Iterable[int] | None = None,
        *,
        purgatory: str | None = None,
    ) -> list[int]:
        """Dead letters back to the group with fresh attempts (None: all of them)."""
        req = gb.redrive_request(self._name(purgatory), group, sequences)
        return list((await self._call(self._stub.Redrive, req, self.timeout)).redriven)

    async def list_groups(self, *, purgatory: str | None = None) -> list[gb.GroupInfo]:
        req = gb.list_groups_request(self._name(purgatory))
        resp = await self._call(self._stub.ListGroups, req, self.timeout)
        return [gb.group_from_proto(g) for g in resp.groups]

    async def delete_group(self, group: str, *, purgatory: str | None = None) -> int:
        req = gb.delete_group_request(self._name(purgatory), group)
        return int((await self._call(self._stub.DeleteGroup, req, self.timeout)).dropped)
