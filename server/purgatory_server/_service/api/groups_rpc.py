"""The worker-group RPCs' handlers and a group member's stream (docs/service.md
"Worker groups").

The unary ones are handlers of :func:`.answer.answer`: each validates (INVALID_ARGUMENT
naming the field; the ``check_*`` functions run before the look-up) and calls the
purgatory's loop-confined :class:`~purgatory_server._service.groups.manager.GroupSet`.
:func:`member_stream` is Subscribe's branch for a group member.

Thread safety: runs on the server's event loop, like the servicer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import Service
from purgatory_server._service.api.backoff_wire import backoff_from_proto, backoff_to_proto
from purgatory_server._service.core.registry import NAME_PATTERN
from purgatory_server._service.groups.entry import EntryState, GroupEntry
from purgatory_server._service.groups.group import WorkerGroup
from purgatory_server._service.groups.group_config import (
    DEFAULT_PREFETCH,
    MAX_ATTEMPTS,
    MAX_PREFETCH,
    MAX_VISIBILITY_TIMEOUT_MS,
    MIN_VISIBILITY_TIMEOUT_MS,
)
from purgatory_server._service.groups.member import Delivery
from purgatory_server._service.groups.selection import selection_from_proto, selection_to_proto
from purgatory_server._service.model.errors import InvalidArgument, NotFound
from purgatory_server._service.wire.convert import event_to_proto

if TYPE_CHECKING:
    from purgatory_server._service.config.server_config import Limits
    from purgatory_server._service.core.named_purgatory import NamedPurgatory

__all__ = [
    "ack",
    "check_ack",
    "check_discard_dead_letters",
    "check_extend_lease",
    "check_group",
    "check_list_dead_letters",
    "check_redrive",
    "delete_group",
    "discard_dead_letters",
    "extend_lease",
    "list_dead_letters",
    "list_groups",
    "member_stream",
    "redrive",
]

# The requests that name one group of one purgatory.
_GroupRequest = (
    pb.AckRequest
    | pb.ExtendLeaseRequest
    | pb.ListDeadLettersRequest
    | pb.RedriveRequest
    | pb.DiscardDeadLettersRequest
)

DEFAULT_PAGE_SIZE = 100
# Response header of a group member's Subscribe: the group's cursor when it joined.
METADATA_GROUP_SEQUENCE = "purgatory-group-sequence"


def check_group(field: str, name: str, limits: Limits) -> None:
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
    if delivery.priority:
        event.priority = delivery.priority
    if delivery.ordering_key:
        event.ordering_key = delivery.ordering_key
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
    """A Subscribe stream that joined ``request.group``: its deliveries (up to
    ``max_batch`` of those ready together in one message), heartbeats.

    The response headers are sent once the member has joined (header
    "purgatory-group-sequence": the group's cursor then), so a client that waits for them
    knows every outcome published afterwards reaches the group.
    """
    check_group("group", request.group, limits)
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
    _check_range("max_batch", request.max_batch, 1, MAX_PREFETCH)
    selection = None
    if request.HasField("selection"):
        selection = selection_from_proto(request.selection, limits.max_key_length)
    backoff = (
        backoff_from_proto("backoff", request.backoff) if request.HasField("backoff") else None
    )
    group, member = purgatory.groups.join(
        request.group,
        request.visibility_timeout_ms,
        request.max_attempts,
        request.prefetch or DEFAULT_PREFETCH,
        selection=selection,
        backoff=backoff,
    )
    per_message = request.max_batch
    try:
        await context.send_initial_metadata(((METADATA_GROUP_SEQUENCE, str(group.last_sequence)),))
        while True:
            batch = await member.next_batch(idle_s)
            if not batch:
                yield pb.OperationEvent(
                    heartbeat=True, caught_up_sequence=group.last_sequence, group=group.name
                )
            if per_message > 1:
                for start in range(0, len(batch), per_message):
                    envelope = pb.OperationEvent()
                    envelope.batch.extend(
                        map(delivery_to_proto, batch[start : start + per_message])
                    )
                    yield envelope
                continue
            for delivery in batch:
                yield delivery_to_proto(delivery)
    finally:
        group.leave(member)


def _group(purgatory: NamedPurgatory, request: _GroupRequest, limits: Limits) -> WorkerGroup:
    check_group("group", request.group, limits)
    return purgatory.groups.get(request.group)


def check_ack(request: pb.AckRequest, limits: Limits) -> None:
    _check_sequence("sequence", request.sequence)


async def ack(
    service: Service, purgatory: NamedPurgatory, request: pb.AckRequest
) -> pb.AckResponse:
    _group(purgatory, request, service.limits).ack(request.sequence, request.attempt)
    return pb.AckResponse()


def check_extend_lease(request: pb.ExtendLeaseRequest, limits: Limits) -> None:
    _check_sequence("sequence", request.sequence)
    if request.attempt == 0:
        raise InvalidArgument("attempt", "must be the delivery_attempt holding the lease")
    _check_range(
        "visibility_timeout_ms",
        request.visibility_timeout_ms,
        MIN_VISIBILITY_TIMEOUT_MS,
        MAX_VISIBILITY_TIMEOUT_MS,
    )


async def extend_lease(
    service: Service, purgatory: NamedPurgatory, request: pb.ExtendLeaseRequest
) -> pb.ExtendLeaseResponse:
    group = _group(purgatory, request, service.limits)
    deadline = group.extend(request.sequence, request.attempt, request.visibility_timeout_ms)
    return pb.ExtendLeaseResponse(lease_deadline_ms=deadline)


def check_list_dead_letters(request: pb.ListDeadLettersRequest, limits: Limits) -> None:
    _check_range("page_size", request.page_size or DEFAULT_PAGE_SIZE, 1, limits.max_batch_size)


async def list_dead_letters(
    service: Service, purgatory: NamedPurgatory, request: pb.ListDeadLettersRequest
) -> pb.ListDeadLettersResponse:
    group = _group(purgatory, request, service.limits)
    page, next_after = group.dead_letters(
        request.after_sequence, request.page_size or DEFAULT_PAGE_SIZE
    )
    return pb.ListDeadLettersResponse(
        dead_letters=[dead_letter_to_proto(group, e) for e in page],
        next_after_sequence=next_after,
    )


def _check_sequences(
    request: pb.RedriveRequest | pb.DiscardDeadLettersRequest, limits: Limits
) -> None:
    if len(request.sequences) > limits.max_batch_size:
        raise InvalidArgument(
            "sequences",
            f"{len(request.sequences)} entries exceed max_batch_size ({limits.max_batch_size})",
        )


def check_redrive(request: pb.RedriveRequest, limits: Limits) -> None:
    _check_sequences(request, limits)


async def redrive(
    service: Service, purgatory: NamedPurgatory, request: pb.RedriveRequest
) -> pb.RedriveResponse:
    group = _group(purgatory, request, service.limits)
    redriven = group.redrive(list(request.sequences) if request.sequences else None)
    return pb.RedriveResponse(redriven=redriven)


def check_discard_dead_letters(request: pb.DiscardDeadLettersRequest, limits: Limits) -> None:
    # Unlike Redrive, "all" is never implied: an empty list must not drop everything.
    if request.all and request.sequences:
        raise InvalidArgument("all", "not allowed with sequences (name them, or ask for all)")
    if not request.all and not request.sequences:
        raise InvalidArgument("sequences", "name the dead letters to discard, or set all")
    _check_sequences(request, limits)


async def discard_dead_letters(
    service: Service, purgatory: NamedPurgatory, request: pb.DiscardDeadLettersRequest
) -> pb.DiscardDeadLettersResponse:
    group = _group(purgatory, request, service.limits)
    discarded = group.discard(None if request.all else list(request.sequences))
    return pb.DiscardDeadLettersResponse(discarded=discarded)


async def list_groups(
    service: Service, purgatory: NamedPurgatory, request: pb.ListGroupsRequest
) -> pb.ListGroupsResponse:
    out = []
    for group in purgatory.groups.all():
        tally = group.tally()
        info = pb.WorkerGroup(
            name=group.name,
            visibility_timeout_ms=group.config.visibility_timeout_ms,
            max_attempts=group.config.max_attempts,
            ready=tally[EntryState.READY],
            leased=tally[EntryState.LEASED],
            dead_letters=tally[EntryState.DEAD],
            members=len(group.members),
            last_sequence=group.last_sequence,
            retrying=tally[EntryState.WAITING],
        )
        backoff = group.config.backoff
        if backoff is not None:
            info.backoff.CopyFrom(backoff_to_proto(backoff))
        selection = group.config.selection
        if selection is not None:
            info.selection.CopyFrom(selection_to_proto(selection))
        out.append(info)
    return pb.ListGroupsResponse(groups=out)


async def delete_group(
    service: Service, purgatory: NamedPurgatory, request: pb.DeleteGroupRequest
) -> pb.DeleteGroupResponse:
    check_group("group", request.group, service.limits)
    gone = NotFound(f"group {request.group!r} was deleted", "group", request.group)
    return pb.DeleteGroupResponse(dropped=purgatory.groups.delete(request.group, gone))
