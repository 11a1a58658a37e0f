"""Nack, AckBatch and AckStream's handlers (docs/service.md "Worker groups": negative
acknowledgement, batch acknowledgements).

Handlers of :func:`.answer.answer`, like :mod:`.groups_rpc`'s: the ``check_*`` functions
validate (INVALID_ARGUMENT naming the field) before the group is looked up.
:func:`ack_stream` answers AckStream's requests one by one, in order, each as AckBatch
would, a failure in its own response.

Thread safety: runs on the server's event loop, like the servicer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import Service, answer
from purgatory_server._service.api.groups_rpc import check_group
from purgatory_server._service.api.session_rpc import RefusedFrame
from purgatory_server._service.groups.backoff import MAX_RETRY_DELAY_MS
from purgatory_server._service.groups.batch import BatchEntry
from purgatory_server._service.model.errors import InvalidArgument, ServiceError

if TYPE_CHECKING:
    from purgatory_server._service.config.server_config import Limits
    from purgatory_server._service.core.named_purgatory import NamedPurgatory

__all__ = ["AckFrames", "ack_batch", "ack_stream", "check_ack_batch", "check_nack", "nack"]

# AckStream's requests as the edge passes them on (a refused one: RefusedFrame).
AckFrames = AsyncIterator["pb.AckStreamRequest | RefusedFrame"]


def _check_nack_fields(prefix: str, sequence: int, delay_ms: int | None, dead_letter: bool) -> None:
    if sequence == 0:
        raise InvalidArgument(f"{prefix}sequence", "must be a sequence (1 or more)")
    if delay_ms is not None:
        if dead_letter:
            raise InvalidArgument(f"{prefix}delay_ms", "not allowed with dead_letter")
        if delay_ms > MAX_RETRY_DELAY_MS:
            raise InvalidArgument(
                f"{prefix}delay_ms", f"{delay_ms} is outside [0, {MAX_RETRY_DELAY_MS}]"
            )


def _delay(msg: pb.NackRequest | pb.AckBatchEntry) -> int | None:
    return msg.delay_ms if msg.HasField("delay_ms") else None


def check_nack(request: pb.NackRequest, limits: Limits) -> None:
    _check_nack_fields("", request.sequence, _delay(request), request.dead_letter)


async def nack(
    service: Service, purgatory: NamedPurgatory, request: pb.NackRequest
) -> pb.NackResponse:
    check_group("group", request.group, service.limits)
    group = purgatory.groups.get(request.group)
    at = group.nack(request.sequence, request.attempt, _delay(request), request.dead_letter)
    return pb.NackResponse(dead_letter=not at, redeliver_at_ms=at)


def check_ack_batch(request: pb.AckBatchRequest | pb.AckStreamRequest, limits: Limits) -> None:
    entries = request.entries
    if not entries:
        raise InvalidArgument("entries", "must name at least one ack or nack")
    if len(entries) > limits.max_batch_size:
        raise InvalidArgument(
            "entries", f"{len(entries)} entries exceed max_batch_size ({limits.max_batch_size})"
        )
    for i, e in enumerate(entries):
        if e.nack:
            _check_nack_fields(f"entries[{i}].", e.sequence, _delay(e), e.dead_letter)
        elif e.sequence == 0:
            raise InvalidArgument(f"entries[{i}].sequence", "must be a sequence (1 or more)")
        elif e.HasField("delay_ms") or e.dead_letter:
            raise InvalidArgument(f"entries[{i}].nack", "delay_ms and dead_letter need nack")


def _settle(
    service: Service, purgatory: NamedPurgatory, request: pb.AckBatchRequest | pb.AckStreamRequest
) -> list[pb.AckBatchResult]:
    check_group("group", request.group, service.limits)
    group = purgatory.groups.get(request.group)
    results = group.settle(
        [
            BatchEntry(e.sequence, e.attempt, e.nack, _delay(e), e.dead_letter)
            for e in request.entries
        ]
    )
    return [
        pb.AckBatchResult(
            sequence=r.sequence,
            code=r.code,
            message=r.message,
            dead_letter=r.dead_letter,
            redeliver_at_ms=r.retry_at_ms,
        )
        for r in results
    ]


async def ack_batch(
    service: Service, purgatory: NamedPurgatory, request: pb.AckBatchRequest
) -> pb.AckBatchResponse:
    return pb.AckBatchResponse(results=_settle(service, purgatory, request))


async def _ack_stream_request(
    service: Service, purgatory: NamedPurgatory, request: pb.AckStreamRequest
) -> pb.AckStreamResponse:
    return pb.AckStreamResponse(results=_settle(service, purgatory, request))


async def ack_stream(service: Service, requests: AckFrames) -> AsyncIterator[pb.AckStreamResponse]:
    """One AckStreamResponse per request, in order: its results, or (a request refused by
    the edge, or one that failed as a whole) its status code and message."""
    async for request in requests:
        if isinstance(request, RefusedFrame):
            yield _failed(request.error)
            continue
        try:
            response = await answer(service, request, _ack_stream_request, check_ack_batch)
        except ServiceError as exc:
            response = _failed(exc)
        yield response


def _failed(exc: ServiceError) -> pb.AckStreamResponse:
    return pb.AckStreamResponse(code=int(exc.code), message=exc.message)
