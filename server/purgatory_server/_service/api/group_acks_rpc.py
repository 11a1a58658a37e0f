"""Nack and AckBatch's handlers (docs/service.md "Worker groups": negative
acknowledgement, batch acknowledgements).

Handlers of :func:`.answer.answer`, like :mod:`.groups_rpc`'s: the ``check_*`` functions
validate (INVALID_ARGUMENT naming the field) before the group is looked up.

Thread safety: runs on the server's event loop, like the servicer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import Service
from purgatory_server._service.api.groups_rpc import check_group
from purgatory_server._service.groups.backoff import MAX_RETRY_DELAY_MS
from purgatory_server._service.groups.batch import BatchEntry
from purgatory_server._service.model.errors import InvalidArgument

if TYPE_CHECKING:
    from purgatory_server._service.config.server_config import Limits
    from purgatory_server._service.core.named_purgatory import NamedPurgatory

__all__ = ["ack_batch", "check_ack_batch", "check_nack", "nack"]


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


def check_ack_batch(request: pb.AckBatchRequest, limits: Limits) -> None:
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


async def ack_batch(
    service: Service, purgatory: NamedPurgatory, request: pb.AckBatchRequest
) -> pb.AckBatchResponse:
    check_group("group", request.group, service.limits)
    group = purgatory.groups.get(request.group)
    results = group.settle(
        [
            BatchEntry(e.sequence, e.attempt, e.nack, _delay(e), e.dead_letter)
            for e in request.entries
        ]
    )
    return pb.AckBatchResponse(
        results=[
            pb.AckBatchResult(
                sequence=r.sequence,
                code=r.code,
                message=r.message,
                dead_letter=r.dead_letter,
                redeliver_at_ms=r.retry_at_ms,
            )
            for r in results
        ]
    )
