"""Worker-group methods of the client (a mix-in): join a group and read its deliveries
(:class:`AsyncGroupStream`), ack, nack (one or a batch), extend leases, list, redrive and
discard dead letters.
Requests and models: ``_groups_base``; semantics: docs/service.md "Worker groups"."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import Any

import grpc

from purgatory_client import _groups_base as gb
from purgatory_client._base import ClientBase
from purgatory_client._resume import Backoff, ResumePolicy
from purgatory_client._routing import MAX_HOPS, METADATA_OWNER
from purgatory_client.errors import UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["AsyncGroupMethods", "AsyncGroupStream"]


class AsyncGroupMethods(ClientBase):
    """Join a worker group, ack, nack, extend leases, list, redrive and discard dead letters."""

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
        selection: gb.GroupSelection | None = None,
        backoff: gb.RetryBackoff | None = None,
    ) -> AsyncGroupStream:
        """Join ``group`` (created on first join with the given settings; 0: the
        group's, or the defaults) and return the stream of deliveries leased to this
        member. The member has joined when this returns: every outcome published from
        then on reaches the group. ``prefetch``: leases held at once; ``backoff``: the
        group's retry backoff (creation; None: none, or the group's). A stream dropped by
        UNAVAILABLE (a server restart) is re-joined under the client's ResumePolicy;
        other errors are raised. Leases held when a stream drops run out and are
        redelivered (at-least-once). ``close()`` leaves the group. ``selection``:
        priorities, an ordering key and a rate limit, for a group this join creates
        (None: the group's; another one than the group's: FailedPreconditionError)."""
        req = gb.group_subscribe_request(
            self._name(purgatory),
            group,
            visibility_timeout_ms=visibility_timeout_ms,
            max_attempts=max_attempts,
            prefetch=prefetch,
            heartbeat_interval_ms=heartbeat_interval_ms,
            selection=selection,
            backoff=backoff,
        )
        stream = AsyncGroupStream(self, req, Backoff(resume or self._resume))
        await stream._open()
        return stream

    async def ack(
        self, group: str, sequence: int, *, attempt: int = 0, purgatory: str | None = None
    ) -> None:
        """End a delivery (or discard a dead letter). ``attempt`` 0: whatever delivery
        holds it; else FailedPreconditionError if it was delivered again since."""
        req = gb.ack_request(self._name(purgatory), group, sequence, attempt)
        await self._call(self._stub.Ack, req, self.timeout)

    async def nack(
        self,
        group: str,
        sequence: int,
        *,
        attempt: int = 0,
        delay_ms: int | None = None,
        dead_letter: bool = False,
        purgatory: str | None = None,
    ) -> gb.NackResult:
        """End a delivery unacked: offered again after ``delay_ms`` (None: the group's
        backoff, or at once), or a dead letter now (``dead_letter``; also once out of
        attempts). A dead letter stays one. Fenced by ``attempt`` like :meth:`ack`."""
        req = gb.nack_request(
            self._name(purgatory),
            group,
            sequence,
            attempt,
            delay_ms=delay_ms,
            dead_letter=dead_letter,
        )
        resp = await self._call(self._stub.Nack, req, self.timeout)
        return gb.nack_from_proto(resp)

    async def ack_batch(
        self,
        group: str,
        entries: Iterable[gb.AckEntry | int],
        *,
        purgatory: str | None = None,
    ) -> list[gb.AckResult]:
        """Acks and nacks (:class:`AckEntry`, or a bare sequence: an unfenced ack) in one
        call, applied in order, each answered on its own (one per entry, in order): a
        stale or unknown entry fails alone (its ``code``), the others take effect."""
        req = gb.ack_batch_request(self._name(purgatory), group, entries)
        resp = await self._call(self._stub.AckBatch, req, self.timeout)
        return gb.ack_results_from_proto(resp)

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

    async def discard_dead_letters(
        self,
        group: str,
        sequences: Iterable[int] | None = None,
        *,
        purgatory: str | None = None,
    ) -> list[int]:
        """Drop dead letters for good (None: all of them; an empty list is refused with
        InvalidArgumentError); the sequences that were dead letters and are gone."""
        req = gb.discard_request(self._name(purgatory), group, sequences)
        return list((await self._call(self._stub.DiscardDeadLetters, req, self.timeout)).discarded)

    async def list_groups(self, *, purgatory: str | None = None) -> list[gb.GroupInfo]:
        req = gb.list_groups_request(self._name(purgatory))
        resp = await self._call(self._stub.ListGroups, req, self.timeout)
        return [gb.group_from_proto(g) for g in resp.groups]

    async def delete_group(self, group: str, *, purgatory: str | None = None) -> int:
        req = gb.delete_group_request(self._name(purgatory), group)
        return int((await self._call(self._stub.DeleteGroup, req, self.timeout)).dropped)


class AsyncGroupStream:
    """A member's deliveries (an iterator of :class:`~purgatory_client.AsyncDelivery`).

    One consumer at a time; ``ack``/``extend`` of its deliveries may be called from
    anywhere the client may be (they are unary calls on the client).
    """

    def __init__(self, client: AsyncGroupMethods, request: Any, backoff: Backoff) -> None:
        self._client = client
        self._request = request
        self._backoff = backoff
        self._closed = False
        self._call: Any = None
        # The rest of a message's batch of deliveries, handed out before the next read.
        self._batched: deque[gb.AsyncDelivery] = deque()

    async def _open(self) -> None:
        client = self._client
        name = self._request.purgatory
        for hop in range(MAX_HOPS + 1):  # a refusal naming the owner: join there (_routing)
            method = client._router.method(name, client._stub.Subscribe)
            call = method(self._request, metadata=with_trace(client._metadata))
            self._call = call
            try:
                if not await call.initial_metadata():
                    async for _ in call:  # ended before joining: raises its error
                        break
                return
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
            client._router.learn(name, error)
            if hop == MAX_HOPS or not error.metadata.get(METADATA_OWNER):
                raise error from None

    def __aiter__(self) -> AsyncGroupStream:
        return self

    async def __anext__(self) -> gb.AsyncDelivery:
        if self._batched:
            return self._batched.popleft()
        while True:
            try:
                async for msg in self._call:
                    if msg.heartbeat:
                        continue
                    self._backoff.progress()
                    if not msg.batch:
                        return gb.delivery_from_proto(msg, self._client, gb.AsyncDelivery)  # type: ignore[no-any-return]
                    self._batched.extend(
                        gb.delivery_from_proto(m, self._client, gb.AsyncDelivery) for m in msg.batch
                    )
                    return self._batched.popleft()
                raise StopAsyncIteration
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                if self._closed or not isinstance(error, UnavailableError):
                    raise error from None
                client = self._client
                client._router.learn(self._request.purgatory, error)  # a new owner, if named
                await asyncio.sleep(self._backoff.delay(error))
            try:
                await self._open()
            except UnavailableError:
                continue

    async def aclose(self) -> None:
        """Leave the group (leases held run out and go to other members)."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    async def __aenter__(self) -> AsyncGroupStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
