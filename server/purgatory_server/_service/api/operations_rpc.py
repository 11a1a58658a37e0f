"""The operation RPCs' handlers: register (long-poll), signal, force-complete, look up,
cancel, reschedule.

Handlers of :func:`.answer.answer`: each validates the request (INVALID_ARGUMENT naming
the field), calls the loop-confined purgatory and builds the response. Long-polls await
futures; nothing else blocks the loop beyond engine work.
"""

from __future__ import annotations

import time

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import Service
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.model.conditions import EMPTY_SIGNAL
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import (
    batch_status_response,
    operation_status,
    operation_status_with_progress,
    status_response,
)
from purgatory_server._service.wire.validation import (
    FieldPrefixes,
    check_batch,
    check_due_time,
    check_key,
    check_timeout,
    operation_request,
    operation_requests,
    required_id,
    signal_from_proto,
    signals_from_proto,
)

__all__ = [
    "batch_check_and_complete",
    "batch_try_complete_else_watch",
    "cancel",
    "check_and_complete",
    "force_complete",
    "get_operation",
    "reschedule",
    "try_complete_else_watch",
]


async def try_complete_else_watch(
    service: Service, purgatory: NamedPurgatory, request: pb.TryCompleteElseWatchRequest
) -> pb.TryCompleteElseWatchResponse:
    op_request = operation_request("", request, service.limits)
    ((target, created),) = purgatory.register((op_request,), ("",))
    if request.wait and not isinstance(target, Outcome):
        metrics = purgatory.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        target = await purgatory.wait_one(target)
        if metrics is not None:
            metrics.longpoll.record(time.perf_counter() - started)
    return status_response(target, created)


async def batch_try_complete_else_watch(
    service: Service, purgatory: NamedPurgatory, request: pb.BatchTryCompleteElseWatchRequest
) -> pb.BatchTryCompleteElseWatchResponse:
    limits = service.limits
    check_batch("operations", len(request.operations), limits)
    service.admission.admit(len(request.operations), "operations")
    requests = operation_requests("operations", request.operations, limits)
    registered = purgatory.register(requests, FieldPrefixes("operations", len(requests)))
    if request.wait:
        live = [t for t, _ in registered if not isinstance(t, Outcome)]
        if live:
            outcomes = await purgatory.wait_all(live)
            registered = [
                (t if isinstance(t, Outcome) else outcomes[t.operation_id], c)
                for t, c in registered
            ]
    return batch_status_response(registered)


async def check_and_complete(
    service: Service, purgatory: NamedPurgatory, request: pb.CheckAndCompleteRequest
) -> pb.CheckAndCompleteResponse:
    check_key("key", request.key, service.limits)
    # A bare wake-up (no signal): skip building the sub-message to find it empty.
    signal = EMPTY_SIGNAL
    if request.HasField("signal"):
        signal = signal_from_proto("signal", request.signal, service.limits)
    (completed,) = purgatory.signal(((request.key, signal),))
    return pb.CheckAndCompleteResponse(completed=completed)


async def batch_check_and_complete(
    service: Service, purgatory: NamedPurgatory, request: pb.BatchCheckAndCompleteRequest
) -> pb.BatchCheckAndCompleteResponse:
    limits = service.limits
    check_batch("signals", len(request.signals), limits)
    service.admission.admit(len(request.signals), "signals")
    counts = purgatory.signal(signals_from_proto("signals", request.signals, limits))
    return pb.BatchCheckAndCompleteResponse(completed=sum(counts), completed_per_signal=counts)


async def force_complete(
    service: Service, purgatory: NamedPurgatory, request: pb.ForceCompleteRequest
) -> pb.ForceCompleteResponse:
    op_id = required_id("operation_id", request.operation_id, service.limits)
    won, target = purgatory.force_complete(op_id)
    return pb.ForceCompleteResponse(completed=won, operation=operation_status(target, False))


async def get_operation(
    service: Service, purgatory: NamedPurgatory, request: pb.GetOperationRequest
) -> pb.GetOperationResponse:
    target = purgatory.lookup(required_id("operation_id", request.operation_id, service.limits))
    return pb.GetOperationResponse(operation=operation_status_with_progress(target))


async def cancel(
    service: Service, purgatory: NamedPurgatory, request: pb.CancelRequest
) -> pb.CancelResponse:
    limits = service.limits
    target = request.WhichOneof("target")
    if target == "key":
        check_key("key", request.key, limits)
        ended = purgatory.cancel(key=request.key)
    elif target == "operation_id_prefix":
        prefix = required_id("operation_id_prefix", request.operation_id_prefix, limits)
        ended = purgatory.cancel(prefix=prefix)
    elif target == "operation_ids":
        ids = request.operation_ids.ids
        check_batch("operation_ids.ids", len(ids), limits)
        for i, op_id in enumerate(ids):
            required_id(f"operation_ids.ids[{i}]", op_id, limits)
        ended = purgatory.cancel(ids)
    else:
        raise InvalidArgument("target", "set one of operation_ids, key or operation_id_prefix")
    return pb.CancelResponse(cancelled=[operation_status(o, False) for o in ended])


async def reschedule(
    service: Service, purgatory: NamedPurgatory, request: pb.RescheduleRequest
) -> pb.RescheduleResponse:
    limits = service.limits
    op_id = required_id("operation_id", request.operation_id, limits)
    deadline = request.WhichOneof("deadline")
    if deadline == "timeout_ms":
        check_timeout("timeout_ms", request.timeout_ms, limits)
        op = purgatory.reschedule(op_id, request.timeout_ms, None)
    elif deadline == "due_time_ms":
        check_due_time("due_time_ms", request.due_time_ms, limits, purgatory.wall_clock_ms())
        op = purgatory.reschedule(op_id, None, request.due_time_ms)
    else:
        raise InvalidArgument("deadline", "set one of timeout_ms or due_time_ms")
    return pb.RescheduleResponse(operation=operation_status(op, False))
