"""The worker-group RPCs, as a mix-in of the servicer (docs/service.md "Worker groups").

Kept out of ``servicer.py`` so the servicer gains only a base class and one branch in
``Subscribe``. Every method validates (INVALID_ARGUMENT naming the field), calls the
purgatory's loop-confined :class:`~.manager.GroupSet`, and for a durable purgatory
answers only once the change is journaled (the same barrier as every other RPC).

Thread safety: runs on the server's event loop, like the servicer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.core.errors import InvalidArgument, NotFound
from purgatory_server._service.core.registry import NAME_PATTERN
from purgatory_server._service.groups.entry import GroupEntry
from purgatory_server._service.groups.group import WorkerGroup
from purgatory_server._service.groups.group_config import (
    DEFAULT_PREFETCH,
    MAX_ATTEMPTS,
    MAX_PREFETCH,
    MAX_VISIBILITY_TIMEOUT_MS,
    MIN_VISIBILITY_TIMEOUT_MS,
)
from purgatory_server._service.groups.member import Delivery
from purgatory_server._service.wire.convert import event_to_proto

if TYPE_CHECKING:
    from purgatory_server._service.config.server_config import Limits
    from purgatory_server._service.core.named_purgatory import NamedPurgatory
    from purgatory_server._service.core.registry import PurgatoryRegistry

__all__ = ["GroupRpcs", "member_stream"]

# The requests that name one group of one purgatory.
_GroupRequest = (
    pb.AckRequest | pb.ExtendLeaseRequest | pb.ListDeadLettersRequest | pb.RedriveRequest
)

DEFAULT_PAGE_SIZE = 100
# Response header of a group member's Subscribe: the group's cursor when it joined.
METADATA_GROUP_SEQUENCE = "purgatory-group-sequence"


def _check_group(field: str, name: str, limits: Limits) -> None:
    # The same rule as purgatory names: it appears in logs, metrics and the CLI.
    if not name:
        raise InvalidArgument(field, "must not be empty")
    if len(name) > limits.max_name_length:
        raise InvalidArgument(field, f"longer than max_name_length ({limits.max_name_length})")
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidArgument(field, "use letters, digits, '.', '_' and '-' only")


def _check_range(field: str, value: int, low: int, high: int) -> None:
    if value and not low <= value <= high:
        raise InvalidArgument(field, f"{value} is outside [{low}, {high}] (0: the default)")


def _check_sequence(field: str, value: int) -> None:
    if value == 0:
        raise InvalidArgument(field, "must be a sequence (1 or more)")


def delivery_to_proto(delivery: Delivery) -> pb.OperationEvent:
    event = event_to_proto(delivery.outcome)
    event.delivery_attempt = delivery.attempt
    event.lease_deadline_ms = delivery.lease_deadline_ms
    event.group = delivery.group
    return event


def dead_letter_to_proto(group: WorkerGroup, entry: GroupEntry) -> pb.OperationEvent:
    event = event_to_proto(entry.outcome)
    event.delivery_attempt = entry.attempts
    event.group = group.name
    event.dead_letter = True
    return event


async def member_stream(
    purgatory: NamedPurgatory,
    request: pb.SubscribeRequest,
    context: grpc.aio.ServicerContext,
    limits: Limits,
    idle_s: float | None,
) -> AsyncIterator[pb.OperationEvent]:
    """A Subscribe stream that joined ``request.group``: its deliveries, heartbeats.

    The response headers are sent once the member has joined (header
    "purgatory-group-sequence": the group's cursor then), so a client that waits for them
    knows every outcome published afterwards reaches the group.
    """
    _check_group("group", request.group, limits)
    if request.HasField("after_sequence"):
        raise InvalidArgument("after_sequence", "not allowed with group (a group has a cursor)")
    if request.incarnation:
        raise InvalidArgument("incarnation", "not allowed with group")
    flt = request.filter
    if flt.states or flt.keys or flt.operation_id_prefix:
        raise InvalidArgument("filter", "not allowed with group (a group takes every outcome)")
    _check_range(
        "visibility_timeout_ms",
        request.visibility_timeout_ms,
        MIN_VISIBILITY_TIMEOUT_MS,
        MAX_VISIBILITY_TIMEOUT_MS,
    )
    _check_range("max_attempts", request.max_attempts, 1, MAX_ATTEMPTS)
    _check_range("prefetch", request.prefetch, 1, MAX_PREFETCH)
    group, member = purgatory.groups.join(
        request.group,
        request.visibility_timeout_ms,
        request.max_attempts,
        request.prefetch or DEFAULT_PREFETCH,
    )
    try:
        await context.send_initial_metadata(((METADATA_GROUP_SEQUENCE, str(group.last_sequence)),))
        while True:
            batch = await member.next_batch(idle_s)
            if not batch:
                yield pb.OperationEvent(
                    heartbeat=True, caught_up_sequence=group.last_sequence, group=group.name
                )
            for delivery in batch:
                yield delivery_to_proto(delivery)
    finally:
        group.leave(member)


class GroupRpcs:
    """Ack, ExtendLease, ListDeadLetters, Redrive, ListGroups, DeleteGroup."""

    _registry: PurgatoryRegistry
    _limits: Limits
    # The servicer's durability barrier (answer once the change is journaled).
    _acknowledge: Callable[[NamedPurgatory], Awaitable[None]]

    def _group(self, request: _GroupRequest) -> tuple[NamedPurgatory, WorkerGroup]:
        purgatory = self._registry.get(request.purgatory)
        _check_group("group", request.group, self._limits)
        return purgatory, purgatory.groups.get(request.group)

    async def Ack(
        self, request: pb.AckRequest, context: grpc.aio.ServicerContext
    ) -> pb.AckResponse:
        _check_sequence("sequence", request.sequence)
        purgatory, group = self._group(request)
        group.ack(request.sequence, request.attempt)
        await self._acknowledge(purgatory)
        return pb.AckResponse()

    async def ExtendLease(
        self, request: pb.ExtendLeaseRequest, context: grpc.aio.ServicerContext
    ) -> pb.ExtendLeaseResponse:
        _check_sequence("sequence", request.sequence)
        if request.attempt == 0:
            raise InvalidArgument("attempt", "must be the delivery_attempt holding the lease")
        _check_range(
            "visibility_timeout_ms",
            request.visibility_timeout_ms,
            MIN_VISIBILITY_TIMEOUT_MS,
            MAX_VISIBILITY_TIMEOUT_MS,
        )
        purgatory, group = self._group(request)
        deadline = group.extend(request.sequence, request.attempt, request.visibility_timeout_ms)
        await self._acknowledge(purgatory)
        return pb.ExtendLeaseResponse(lease_deadline_ms=deadline)

    async def ListDeadLetters(
        self, request: pb.ListDeadLettersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDeadLettersResponse:
        limit = request.page_size or DEFAULT_PAGE_SIZE
        _check_range("page_size", limit, 1, self._limits.max_batch_size)
        purgatory, group = self._group(request)
        page, next_after = group.dead_letters(request.after_sequence, limit)
        response = pb.ListDeadLettersResponse(
            dead_letters=[dead_letter_to_proto(group, e) for e in page],
            next_after_sequence=next_after,
        )
        await self._acknowledge(purgatory)
        return response

    async def Redrive(
        self, request: pb.RedriveRequest, context: grpc.aio.ServicerContext
    ) -> pb.RedriveResponse:
        if len(request.sequences) > self._limits.max_batch_size:
            raise InvalidArgument(
                "sequences",
                f"{len(request.sequences)} entries exceed max_batch_size "
                f"({self._limits.max_batch_size})",
            )
        purgatory, group = self._group(request)
        redriven = group.redrive(list(request.sequences) if request.sequences else None)
        await self._acknowledge(purgatory)
        return pb.RedriveResponse(redriven=redriven)

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListGroupsResponse:
        purgatory = self._registry.get(request.purgatory)
        out = []
        for group in purgatory.groups.all():
            ready, leased, dead = group.counts()
            out.append(
                pb.WorkerGroup(
                    name=group.name,
                    visibility_timeout_ms=group.config.visibility_timeout_ms,
                    max_attempts=group.config.max_attempts,
                    ready=ready,
                    leased=leased,
                    dead_letters=dead,
                    members=len(group.members),
                    last_sequence=group.last_sequence,
                )
            )
        await self._acknowledge(purgatory)
        return pb.ListGroupsResponse(groups=out)

    async def DeleteGroup(
        self, request: pb.DeleteGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteGroupResponse:
        purgatory = self._registry.get(request.purgatory)
        _check_group("group", request.group, self._limits)
        gone = NotFound(f"group {request.group!r} was deleted", "group", request.group)
        dropped = purgatory.groups.delete(request.group, gone)
        await self._acknowledge(purgatory)
        return pb.DeleteGroupResponse(dropped=dropped)
