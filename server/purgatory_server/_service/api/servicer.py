"""The ``purgatory.v1.PurgatoryService`` servicer: typed RPCs onto the registry.

Each method takes its generated request type and returns its response type: it validates
the request (:mod:`.validation`), calls the loop-confined registry/purgatory, and builds
the response (:mod:`.convert`). Errors are raised as plain
:class:`~.errors.ServiceError`; the edge (:mod:`.edge`, via :mod:`.status_mapping`) ends the call
with their status. All methods run on the server's event loop; nothing here blocks it
except for microseconds of engine work, and long-polls await futures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_server._journal import JournalClosedError, JournalError
from purgatory_server._service.api import schedules_rpc as schedule_rpc
from purgatory_server._service.api.groups_rpc import GroupRpcs, member_stream
from purgatory_server._service.api.listing_rpc import list_operations
from purgatory_server._service.api.session_rpc import ClientGone, SessionFrames, SessionStream
from purgatory_server._service.core.conditions import EMPTY_SIGNAL
from purgatory_server._service.core.errors import (
    METADATA_INCARNATION,
    FailedPrecondition,
    InvalidArgument,
    ShuttingDown,
)
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.outcomes.event_log import Outcome
from purgatory_server._service.outcomes.incarnation import check_incarnation
from purgatory_server._service.wire.convert import (
    batch_status_response,
    event_to_proto,
    operation_status,
    operation_status_with_progress,
    purgatory_to_proto,
    settings_from_proto,
    status_response,
)
from purgatory_server._service.wire.validation import (
    FieldPrefixes,
    check_batch,
    check_due_time,
    check_key,
    check_settings,
    check_timeout,
    filter_from_proto,
    heartbeat_interval,
    operation_request,
    operation_requests,
    required_id,
    signal_from_proto,
    signals_from_proto,
)

__all__ = ["METADATA_INCARNATION", "METADATA_START_AFTER", "PurgatoryServicer"]

# Response header of Subscribe: the sequence the stream starts after (resume point).
METADATA_START_AFTER = "purgatory-start-after"


async def _acknowledged(purgatory: NamedPurgatory) -> None:
    """Return once everything this call recorded is durable.

    In-memory purgatories have no barrier and return at once. A durable one returns only
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


class PurgatoryServicer(GroupRpcs, pb_grpc.PurgatoryServiceServicer):
    _acknowledge = staticmethod(_acknowledged)

    def __init__(self, registry: PurgatoryRegistry, loop: asyncio.AbstractEventLoop) -> None:
        self._registry = registry
        self._loop = loop
        self._limits = registry.limits

    # ------------------------------------------------------------------ admin
    async def CreatePurgatory(
        self, request: pb.CreatePurgatoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreatePurgatoryResponse:
        registry = self._registry
        registry.validate_name(request.name)
        overrides = settings_from_proto(request.name, request.config)
        check_settings("config", overrides, self._limits)
        settings = registry.settings_for(request.name, overrides)
        purgatory = registry.create(settings)
        return pb.CreatePurgatoryResponse(purgatory=purgatory_to_proto(purgatory.stats()))

    async def DeletePurgatory(
        self, request: pb.DeletePurgatoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeletePurgatoryResponse:
        cancelled = await self._registry.delete(request.name)
        return pb.DeletePurgatoryResponse(cancelled=cancelled)

    async def ListPurgatories(
        self, request: pb.ListPurgatoriesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPurgatoriesResponse:
        return pb.ListPurgatoriesResponse(
            purgatories=[purgatory_to_proto(p.stats()) for p in self._registry.all_purgatories()]
        )

    async def GetPurgatory(
        self, request: pb.GetPurgatoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPurgatoryResponse:
        purgatory = self._registry.get(request.name, "name")
        return pb.GetPurgatoryResponse(purgatory=purgatory_to_proto(purgatory.stats()))

    # ------------------------------------------------------------------ operations
    async def TryCompleteElseWatch(
        self, request: pb.TryCompleteElseWatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.TryCompleteElseWatchResponse:
        purgatory = self._registry.get(request.purgatory)
        op_request = operation_request("", request, self._limits)
        ((target, created),) = purgatory.register((op_request,), ("",))
        if request.wait and not isinstance(target, Outcome):
            metrics = purgatory.metrics
            started = time.perf_counter() if metrics is not None else 0.0
            target = await purgatory.feed.wait_one(target)
            if metrics is not None:
                metrics.longpoll.record(time.perf_counter() - started)
        response = status_response(target, created)
        if purgatory.barrier is not None:  # in memory: no coroutine to run
            await _acknowledged(purgatory)
        return response

    async def BatchTryCompleteElseWatch(
        self, request: pb.BatchTryCompleteElseWatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.BatchTryCompleteElseWatchResponse:
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
        if purgatory.barrier is not None:  # in memory: no coroutine to run
            await _acknowledged(purgatory)
        return response

    async def CheckAndComplete(
        self, request: pb.CheckAndCompleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckAndCompleteResponse:
        purgatory = self._registry.get(request.purgatory)
        check_key("key", request.key, self._limits)
        # A bare wake-up (no signal): skip building the sub-message to find it empty.
        signal = EMPTY_SIGNAL
        if request.HasField("signal"):
            signal = signal_from_proto("signal", request.signal, self._limits)
        (completed,) = purgatory.signal(((request.key, signal),))
        response = pb.CheckAndCompleteResponse(completed=completed)
        if purgatory.barrier is not None:  # in memory: no coroutine to run
            await _acknowledged(purgatory)
        return response

    async def BatchCheckAndComplete(
        self, request: pb.BatchCheckAndCompleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.BatchCheckAndCompleteResponse:
        purgatory = self._registry.get(request.purgatory)
        limits = self._limits
        check_batch("signals", len(request.signals), limits)
        counts = purgatory.signal(signals_from_proto("signals", request.signals, limits))
        response = pb.BatchCheckAndCompleteResponse(
            completed=sum(counts), completed_per_signal=counts
        )
        if purgatory.barrier is not None:  # in memory: no coroutine to run
            await _acknowledged(purgatory)
        return response

    async def ForceComplete(
        self, request: pb.ForceCompleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForceCompleteResponse:
        purgatory = self._registry.get(request.purgatory)
        op_id = required_id("operation_id", request.operation_id, self._limits)
        won, target = purgatory.force_complete(op_id)
        response = pb.ForceCompleteResponse(
            completed=won, operation=operation_status(target, False)
        )
        await _acknowledged(purgatory)
        return response

    async def GetOperation(
        self, request: pb.GetOperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetOperationResponse:
        purgatory = self._registry.get(request.purgatory)
        target = purgatory.lookup(required_id("operation_id", request.operation_id, self._limits))
        response = pb.GetOperationResponse(operation=operation_status_with_progress(target))
        await _acknowledged(purgatory)
        return response

    # ------------------------------------------------------------------ delayed messages
    async def Cancel(
        self, request: pb.CancelRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelResponse:
        purgatory = self._registry.get(request.purgatory)
        limits = self._limits
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
        response = pb.CancelResponse(cancelled=[operation_status(o, False) for o in ended])
        await _acknowledged(purgatory)
        return response

    async def Reschedule(
        self, request: pb.RescheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.RescheduleResponse:
        purgatory = self._registry.get(request.purgatory)
        op_id = required_id("operation_id", request.operation_id, self._limits)
        deadline = request.WhichOneof("deadline")
        if deadline == "timeout_ms":
            check_timeout("timeout_ms", request.timeout_ms, self._limits)
            op = purgatory.reschedule(op_id, request.timeout_ms, None)
        elif deadline == "due_time_ms":
            check_due_time(
                "due_time_ms", request.due_time_ms, self._limits, purgatory.wall_clock_ms()
            )
            op = purgatory.reschedule(op_id, None, request.due_time_ms)
        else:
            raise InvalidArgument("deadline", "set one of timeout_ms or due_time_ms")
        response = pb.RescheduleResponse(operation=operation_status(op, False))
        await _acknowledged(purgatory)
        return response

    # ------------------------------------------------------- issue-16c: recurring schedules
    async def UpsertSchedule(
        self, request: pb.UpsertScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpsertScheduleResponse:
        purgatory = self._registry.get(request.purgatory)
        response = schedule_rpc.upsert_schedule(purgatory, self._loop, request, self._limits)
        await _acknowledged(purgatory)
        return response

    async def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteScheduleResponse:
        purgatory = self._registry.get(request.purgatory)
        response = schedule_rpc.delete_schedule(purgatory, self._loop, request)
        await _acknowledged(purgatory)
        return response

    async def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSchedulesResponse:
        purgatory = self._registry.get(request.purgatory)
        response = schedule_rpc.list_schedules(purgatory)
        await _acknowledged(purgatory)
        return response

    async def ListOperations(
        self, request: pb.ListOperationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListOperationsResponse:
        purgatory = self._registry.get(request.purgatory)
        response = list_operations(purgatory, request, self._limits)
        await _acknowledged(purgatory)
        return response

    # ------------------------------------------------------------------ streams
    async def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.OperationEvent]:
        purgatory = self._registry.get(request.purgatory)
        event_filter = filter_from_proto("filter", request.filter, self._limits)
        check_incarnation(request.incarnation, purgatory.incarnation)
        after = request.after_sequence if request.HasField("after_sequence") else None
        idle_s = heartbeat_interval("heartbeat_interval_ms", request.heartbeat_interval_ms)
        if request.group:  # a worker group's member (issue 16b)
            async for event in member_stream(purgatory, request, context, self._limits, idle_s):
                yield event
            return
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

    async def Session(
        self, request_iterator: SessionFrames, context: grpc.aio.ServicerContext
    ) -> None:
        """The bidirectional session (see :mod:`.session_rpc`); the transport's failures
        (the client went away) reach it as :class:`~.session_rpc.ClientGone`."""

        async def frames() -> SessionFrames:
            try:
                async for frame in request_iterator:
                    yield frame
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                raise ClientGone() from exc

        async def send(message: pb.SessionResponse) -> None:
            try:
                await context.write(message)
            except (grpc.RpcError, asyncio.InvalidStateError, ConnectionError) as exc:
                raise ClientGone() from exc

        await SessionStream(self._registry, self._loop).run(frames(), send)
