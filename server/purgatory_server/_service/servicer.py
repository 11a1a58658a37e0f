"""The ``purgatory.v1.PurgatoryService`` servicer: RPCs onto the registry.

Each method validates and converts its request (:mod:`.convert`), calls the loop-confined
registry/purgatory, and builds the response. Errors are raised as
:class:`~.errors.ServiceError` and turned into statuses by the decorators of
:mod:`.errors` (the one mapping). All methods run on the server's event loop; nothing
here blocks it except for microseconds of engine work, and long-polls await futures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_server._journal import JournalClosedError, JournalError
from purgatory_server._service.convert import (
    FieldPrefixes,
    batch_status_response,
    event_to_proto,
    filter_from_proto,
    operation_request,
    operation_requests,
    operation_status,
    operation_status_with_progress,
    purgatory_to_proto,
    settings_from_proto,
    signal_from_proto,
    signals_from_proto,
    status_fields,
)
from purgatory_server._service.errors import (
    METADATA_INCARNATION,
    FailedPrecondition,
    InvalidArgument,
    ShuttingDown,
    stream_errors,
    unary_errors,
)
from purgatory_server._service.events import Outcome
from purgatory_server._service.incarnation import check_incarnation
from purgatory_server._service.named_purgatory import NamedPurgatory
from purgatory_server._service.registry import PurgatoryRegistry
from purgatory_server._service.session import SessionStream
from purgatory_server._service.validation import (
    check_batch,
    check_due_time,
    check_key,
    check_operation_id,
    check_settings,
    check_timeout,
)

__all__ = ["METADATA_INCARNATION", "METADATA_START_AFTER", "PurgatoryServicer"]

# Bounds of SubscribeRequest.heartbeat_interval_ms (0: no heartbeats).
MIN_HEARTBEAT_MS = 100
MAX_HEARTBEAT_MS = 3_600_000

# Response header of Subscribe: the sequence the stream starts after (resume point).
METADATA_START_AFTER = "purgatory-start-after"


async def _acknowledged(purgatory: NamedPurgatory, response: Any) -> Any:
    """``response``, once everything this call recorded is durable.

    In-memory purgatories have no barrier and answer at once. A durable one answers only
    after its journal has written, under the fsync policy, every record made so far,
    which includes this call's (docs/journal.md §10). A journal that cannot write (disk
    full, I/O error) is the server's state, not a bug: FAILED_PRECONDITION, so the caller
    knows the call's effects may not be durable; a closed one means shutting down.
    """
    barrier = purgatory.barrier
    if barrier is not None:
        try:
            await barrier()
        except JournalClosedError as exc:
            raise ShuttingDown() from exc
        except (JournalError, OSError) as exc:
            raise FailedPrecondition(
                f"purgatory {purgatory.name!r} cannot write its journal: {str(exc)[:100]}"
            ) from exc
    return response


class PurgatoryServicer(pb_grpc.PurgatoryServiceServicer):
    def __init__(self, registry: PurgatoryRegistry, loop: asyncio.AbstractEventLoop) -> None:
        self._registry = registry
        self._loop = loop
        self._limits = registry.limits

    # ------------------------------------------------------------------ admin
    @unary_errors
    async def CreatePurgatory(self, request: Any, context: Any) -> Any:
        registry = self._registry
        registry.validate_name(request.name)
        overrides = settings_from_proto(request.name, request.config)
        check_settings("config", overrides, self._limits)
        settings = registry.settings_for(request.name, overrides)
        purgatory = registry.create(settings)
        return pb.CreatePurgatoryResponse(purgatory=purgatory_to_proto(purgatory.stats()))

    @unary_errors
    async def DeletePurgatory(self, request: Any, context: Any) -> Any:
        cancelled = await self._registry.delete(request.name)
        return pb.DeletePurgatoryResponse(cancelled=cancelled)

    @unary_errors
    async def ListPurgatories(self, request: Any, context: Any) -> Any:
        return pb.ListPurgatoriesResponse(
            purgatories=[purgatory_to_proto(p.stats()) for p in self._registry.all_purgatories()]
        )

    @unary_errors
    async def GetPurgatory(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.name, "name")
        return pb.GetPurgatoryResponse(purgatory=purgatory_to_proto(purgatory.stats()))

    # ------------------------------------------------------------------ operations
    @unary_errors
    async def TryCompleteElseWatch(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        op_request = operation_request("", request, self._limits)
        ((target, created),) = purgatory.register((op_request,), ("",))
        if request.wait and not isinstance(target, Outcome):
            metrics = purgatory.metrics
            started = time.perf_counter() if metrics is not None else 0.0
            target = await purgatory.feed.wait_one(target)
            if metrics is not None:
                metrics.longpoll.record(time.perf_counter() - started)
        response = pb.TryCompleteElseWatchResponse(**status_fields(target, created))
        return await _acknowledged(purgatory, response)

    @unary_errors
    async def BatchTryCompleteElseWatch(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        check_batch("operations", len(request.operations), self._limits)
        limits = self._limits
        requests = operation_requests("operations", request.operations, limits)
        registered = purgatory.register(requests, FieldPrefixes("operations", len(requests)))
        if request.wait:
            live = [t for t, _ in registered if not isinstance(t, Outcome)]
            if live:
                outcomes = await purgatory.feed.wait_all(live)
                registered = [
                    (t if isinstance(t, Outcome) else outcomes[t.operation_id], c)
                    for t, c in registered
                ]
        response = batch_status_response(registered)
        return await _acknowledged(purgatory, response)

    @unary_errors
    async def CheckAndComplete(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        check_key("key", request.key, self._limits)
        signal = signal_from_proto("signal", request.signal, self._limits)
        (completed,) = purgatory.signal(((request.key, signal),))
        response = pb.CheckAndCompleteResponse(completed=completed)
        return await _acknowledged(purgatory, response)

    @unary_errors
    async def BatchCheckAndComplete(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        limits = self._limits
        check_batch("signals", len(request.signals), limits)
        counts = purgatory.signal(signals_from_proto("signals", request.signals, limits))
        response = pb.BatchCheckAndCompleteResponse(
            completed=sum(counts), completed_per_signal=counts
        )
        return await _acknowledged(purgatory, response)

    @unary_errors
    async def ForceComplete(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        if not request.operation_id:
            raise InvalidArgument("operation_id", "must not be empty")
        check_operation_id("operation_id", request.operation_id, self._limits)
        won, target = purgatory.force_complete(request.operation_id)
        response = pb.ForceCompleteResponse(
            completed=won, operation=operation_status(target, False)
        )
        return await _acknowledged(purgatory, response)

    @unary_errors
    async def GetOperation(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        if not request.operation_id:
            raise InvalidArgument("operation_id", "must not be empty")
        check_operation_id("operation_id", request.operation_id, self._limits)
        target = purgatory.lookup(request.operation_id)
        response = pb.GetOperationResponse(operation=operation_status_with_progress(target))
        return await _acknowledged(purgatory, response)

    # ------------------------------------------------------------------ delayed messages
    @unary_errors
    async def Cancel(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        limits = self._limits
        target = request.WhichOneof("target")
        if target == "key":
            check_key("key", request.key, limits)
            ended = purgatory.cancel(key=request.key)
        elif target == "operation_id_prefix":
            prefix = request.operation_id_prefix
            if not prefix:
                raise InvalidArgument("operation_id_prefix", "must not be empty")
            check_operation_id("operation_id_prefix", prefix, limits)
            ended = purgatory.cancel(prefix=prefix)
        elif target == "operation_ids":
            ids = request.operation_ids.ids
            check_batch("operation_ids.ids", len(ids), limits)
            for i, op_id in enumerate(ids):
                if not op_id:
                    raise InvalidArgument(f"operation_ids.ids[{i}]", "must not be empty")
                check_operation_id(f"operation_ids.ids[{i}]", op_id, limits)
            ended = purgatory.cancel(ids)
        else:
            raise InvalidArgument("target", "set one of operation_ids, key or operation_id_prefix")
        response = pb.CancelResponse(cancelled=[operation_status(o, False) for o in ended])
        return await _acknowledged(purgatory, response)

    @unary_errors
    async def Reschedule(self, request: Any, context: Any) -> Any:
        purgatory = self._registry.get(request.purgatory)
        if not request.operation_id:
            raise InvalidArgument("operation_id", "must not be empty")
        check_operation_id("operation_id", request.operation_id, self._limits)
        deadline = request.WhichOneof("deadline")
        if deadline == "timeout_ms":
            check_timeout("timeout_ms", request.timeout_ms, self._limits)
            op = purgatory.reschedule(request.operation_id, request.timeout_ms, None)
        elif deadline == "due_time_ms":
            check_due_time(
                "due_time_ms", request.due_time_ms, self._limits, purgatory.wall_clock_ms()
            )
            op = purgatory.reschedule(request.operation_id, None, request.due_time_ms)
        else:
            raise InvalidArgument("deadline", "set one of timeout_ms or due_time_ms")
        response = pb.RescheduleResponse(operation=operation_status(op, False))
        return await _acknowledged(purgatory, response)

    # ------------------------------------------------------------------ streams
    @stream_errors
    async def Subscribe(self, request: Any, context: Any) -> AsyncIterator[Any]:
        purgatory = self._registry.get(request.purgatory)
        event_filter = filter_from_proto("filter", request.filter, self._limits)
        check_incarnation(request.incarnation, purgatory.incarnation)
        after = request.after_sequence if request.HasField("after_sequence") else None
        heartbeat_ms = request.heartbeat_interval_ms
        if heartbeat_ms and not MIN_HEARTBEAT_MS <= heartbeat_ms <= MAX_HEARTBEAT_MS:
            raise InvalidArgument(
                "heartbeat_interval_ms",
                f"{heartbeat_ms} is outside [{MIN_HEARTBEAT_MS}, {MAX_HEARTBEAT_MS}] ms",
            )
        idle_s = heartbeat_ms / 1000 if heartbeat_ms else None
        subscriber = purgatory.subscribe(after, event_filter)
        try:
            await context.send_initial_metadata(
                (
                    (METADATA_START_AFTER, str(subscriber.start_after)),
                    (METADATA_INCARNATION, purgatory.incarnation),
                )
            )
            metrics = purgatory.metrics
            while True:
                batch = await subscriber.next_batch(idle_s)
                if not batch:
                    # Idle: tell the client the stream is alive and how far it has got.
                    yield pb.OperationEvent(heartbeat=True, caught_up_sequence=subscriber.caught_up)
                elif metrics is not None:
                    metrics.subscriber_lag.record(purgatory.last_sequence - batch[0].sequence)
                for outcome in batch:
                    yield event_to_proto(outcome)
        finally:
            purgatory.unsubscribe(subscriber)

    async def Session(self, request_iterator: AsyncIterator[Any], context: Any) -> None:
        """The bidirectional session (see :mod:`.session`)."""
        await SessionStream(self._registry, self._loop).run(request_iterator, context)
