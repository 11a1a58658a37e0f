"""The ``purgatory.v1.PurgatoryService`` servicer: typed RPCs onto the registry.

The admin RPCs act on the registry here; every other unary RPC is one line,
:func:`.answer.answer` with its feature's handler. Errors are raised as
:class:`~purgatory_server._service.model.errors.ServiceError`; the edge (:mod:`.edge`)
ends the call with their status. All methods run on the server's event loop and block it
only for engine work; long-polls await futures.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_server._service.api import (
    group_acks_rpc,
    groups_rpc,
    listing_rpc,
    operations_rpc,
    schedules_rpc,
)
from purgatory_server._service.api.admission import NO_ADMISSION, Admission
from purgatory_server._service.api.answer import Service, answer
from purgatory_server._service.api.event_cache import EncodedEvents
from purgatory_server._service.api.group_acks_rpc import AckFrames
from purgatory_server._service.api.groups_rpc import member_stream
from purgatory_server._service.api.session_resume import SessionDirectory
from purgatory_server._service.api.session_rpc import ClientGone, SessionFrames, SessionStream
from purgatory_server._service.api.stream_slots import StreamSlots
from purgatory_server._service.api.worker_listing import Siblings
from purgatory_server._service.api.write_turns import WriteTurns
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.model.errors import (
    METADATA_INCARNATION,
    InvalidArgument,
    ServiceError,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.incarnation import check_incarnation
from purgatory_server._service.outcomes.subscriptions import EventFilter
from purgatory_server._service.wire.convert import (
    purgatory_to_proto,
    settings_from_proto,
)
from purgatory_server._service.wire.validation import (
    check_settings,
    filter_from_proto,
    heartbeat_interval,
)
from purgatory_server._service.workers.kept_purgatories import KeptPurgatories

__all__ = ["METADATA_INCARNATION", "METADATA_START_AFTER", "PurgatoryServicer"]

# Response header of Subscribe: the sequence the stream starts after (resume point).
METADATA_START_AFTER = "purgatory-start-after"


class PurgatoryServicer(pb_grpc.PurgatoryServiceServicer):
    def __init__(
        self,
        registry: PurgatoryRegistry,
        loop: asyncio.AbstractEventLoop,
        admission: Admission = NO_ADMISSION,
        siblings: Sequence[str] = (),
        *,
        elsewhere: Callable[[], list[tuple[str, str]]] | None = None,
        definitions: KeptPurgatories | None = None,
    ) -> None:
        self._registry = registry
        # The other workers' own addresses (workers/): ListPurgatories lists theirs too.
        self.siblings = Siblings(siblings)
        # With [cluster] (plaintext): the replicated purgatories served elsewhere and their
        # owners (ClusterNode.elsewhere), which ListPurgatories asks.
        self._elsewhere = elsewhere
        # A worker's run-time purgatories, kept by its supervisor (workers/kept_purgatories.py).
        self._definitions = definitions
        self._loop = loop
        self._limits = registry.limits
        self._service = Service(registry, loop, registry.limits, admission)
        limits = registry.limits
        self._streams = StreamSlots(
            limits.max_subscribe_streams, limits.max_subscribe_streams_per_connection
        )
        # Outcomes encoded once for all Subscribe streams (.event_cache).
        self._events = EncodedEvents(registry.budget)
        # Stream writes per loop turn (.write_turns).
        self._turns = WriteTurns(loop)
        # Session streams open and parked (max_sessions; resumable named sessions).
        self.sessions = SessionDirectory(registry.limits, loop)

    # ------------------------------------------------------------------ admin
    async def CreatePurgatory(
        self, request: pb.CreatePurgatoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreatePurgatoryResponse:
        registry = self._registry
        registry.validate_name(request.name)
        overrides = settings_from_proto(request.name, request.config)
        check_settings("config", overrides, self._limits)
        settings = registry.settings_for(request.name, overrides)
        purgatory = await registry.create_async(settings)
        if self._definitions is not None:
            self._definitions.record(settings)
        return pb.CreatePurgatoryResponse(purgatory=purgatory_to_proto(purgatory.stats()))

    async def DeletePurgatory(
        self, request: pb.DeletePurgatoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeletePurgatoryResponse:
        cancelled = await self._registry.delete(request.name)
        if self._definitions is not None:
            self._definitions.forget(request.name)
        return pb.DeletePurgatoryResponse(cancelled=cancelled)

    async def ListPurgatories(
        self, request: pb.ListPurgatoriesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPurgatoriesResponse:
        purgatories = [purgatory_to_proto(p.stats()) for p in self._registry.all_purgatories()]
        if self.siblings and not Siblings.local_only(context):
            purgatories += await self.siblings.listed(context)
            purgatories.sort(key=lambda p: p.name)
        if self._elsewhere is not None:
            served = {p.name for p in purgatories}
            owners = [(n, owner) for n, owner in self._elsewhere() if n not in served]
            purgatories += await self.siblings.owned_elsewhere(owners, context)
            purgatories.sort(key=lambda p: p.name)
        return pb.ListPurgatoriesResponse(purgatories=purgatories)

    async def GetPurgatory(
        self, request: pb.GetPurgatoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPurgatoryResponse:
        purgatory = self._registry.get(request.name, "name")
        return pb.GetPurgatoryResponse(purgatory=purgatory_to_proto(purgatory.stats()))

    # ------------------------------------------------------------------ operations
    async def TryCompleteElseWatch(
        self, request: pb.TryCompleteElseWatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.TryCompleteElseWatchResponse:
        return await answer(self._service, request, operations_rpc.try_complete_else_watch)

    async def BatchTryCompleteElseWatch(
        self, request: pb.BatchTryCompleteElseWatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.BatchTryCompleteElseWatchResponse:
        return await answer(self._service, request, operations_rpc.batch_try_complete_else_watch)

    async def CheckAndComplete(
        self, request: pb.CheckAndCompleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckAndCompleteResponse:
        return await answer(self._service, request, operations_rpc.check_and_complete)

    async def BatchCheckAndComplete(
        self, request: pb.BatchCheckAndCompleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.BatchCheckAndCompleteResponse:
        return await answer(self._service, request, operations_rpc.batch_check_and_complete)

    async def ForceComplete(
        self, request: pb.ForceCompleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForceCompleteResponse:
        return await answer(self._service, request, operations_rpc.force_complete)

    async def GetOperation(
        self, request: pb.GetOperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetOperationResponse:
        return await answer(self._service, request, operations_rpc.get_operation, reads=True)

    # ------------------------------------------------------------------ delayed messages
    async def Cancel(
        self, request: pb.CancelRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelResponse:
        return await answer(self._service, request, operations_rpc.cancel)

    async def Reschedule(
        self, request: pb.RescheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.RescheduleResponse:
        return await answer(self._service, request, operations_rpc.reschedule)

    async def ListOperations(
        self, request: pb.ListOperationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListOperationsResponse:
        return await answer(self._service, request, listing_rpc.list_operations, reads=True)

    # ------------------------------------------------------------------ recurring schedules
    async def UpsertSchedule(
        self, request: pb.UpsertScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpsertScheduleResponse:
        return await answer(self._service, request, schedules_rpc.upsert_schedule)

    async def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteScheduleResponse:
        return await answer(self._service, request, schedules_rpc.delete_schedule)

    async def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSchedulesResponse:
        return await answer(self._service, request, schedules_rpc.list_schedules, reads=True)

    # ------------------------------------------------------------------ worker groups
    async def Ack(
        self, request: pb.AckRequest, context: grpc.aio.ServicerContext
    ) -> pb.AckResponse:
        return await answer(self._service, request, groups_rpc.ack, groups_rpc.check_ack)

    async def ExtendLease(
        self, request: pb.ExtendLeaseRequest, context: grpc.aio.ServicerContext
    ) -> pb.ExtendLeaseResponse:
        return await answer(
            self._service, request, groups_rpc.extend_lease, groups_rpc.check_extend_lease
        )

    async def Nack(
        self, request: pb.NackRequest, context: grpc.aio.ServicerContext
    ) -> pb.NackResponse:
        return await answer(self._service, request, group_acks_rpc.nack, group_acks_rpc.check_nack)

    async def AckBatch(
        self, request: pb.AckBatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.AckBatchResponse:
        return await answer(
            self._service, request, group_acks_rpc.ack_batch, group_acks_rpc.check_ack_batch
        )

    async def AckStream(
        self, requests: AckFrames, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.AckStreamResponse]:
        """AckBatch on one stream (:func:`.group_acks_rpc.ack_stream`); it takes one of the
        connection's stream slots while open."""
        with self._streams.hold(context.peer()):
            async for response in group_acks_rpc.ack_stream(self._service, requests):
                yield response

    async def ListDeadLetters(
        self, request: pb.ListDeadLettersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDeadLettersResponse:
        return await answer(
            self._service,
            request,
            groups_rpc.list_dead_letters,
            groups_rpc.check_list_dead_letters,
            reads=True,
        )

    async def Redrive(
        self, request: pb.RedriveRequest, context: grpc.aio.ServicerContext
    ) -> pb.RedriveResponse:
        return await answer(self._service, request, groups_rpc.redrive, groups_rpc.check_redrive)

    async def DiscardDeadLetters(
        self, request: pb.DiscardDeadLettersRequest, context: grpc.aio.ServicerContext
    ) -> pb.DiscardDeadLettersResponse:
        return await answer(
            self._service,
            request,
            groups_rpc.discard_dead_letters,
            groups_rpc.check_discard_dead_letters,
        )

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListGroupsResponse:
        return await answer(self._service, request, groups_rpc.list_groups, reads=True)

    async def DeleteGroup(
        self, request: pb.DeleteGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteGroupResponse:
        return await answer(self._service, request, groups_rpc.delete_group)

    # ------------------------------------------------------------------ streams
    async def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.OperationEvent | bytes]:
        purgatory = self._registry.get(request.purgatory)
        event_filter = filter_from_proto("filter", request.filter, self._limits)
        check_incarnation(request.incarnation, purgatory.incarnation)
        after = request.after_sequence if request.HasField("after_sequence") else None
        idle_s = heartbeat_interval("heartbeat_interval_ms", request.heartbeat_interval_ms)
        with self._streams.hold(context.peer()):
            if request.group:  # a worker group's member
                stream = member_stream(purgatory, request, context, self._limits, idle_s)
                async for event in stream:
                    yield event
                return
            if request.max_batch:
                raise InvalidArgument("max_batch", "needs group (it batches a member's deliveries)")
            async for message in _subscription(
                purgatory,
                after,
                event_filter,
                context,
                idle_s,
                encode=self._events.encode,
                turns=self._turns,
            ):
                yield message

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

        turn = self._turns.turn

        async def send(message: pb.SessionResponse) -> None:
            await turn()
            try:
                await context.write(message)
            except (grpc.RpcError, asyncio.InvalidStateError, ConnectionError) as exc:
                raise ClientGone() from exc

        sessions = self.sessions
        sessions.open()  # RESOURCE_EXHAUSTED past max_sessions
        try:
            await SessionStream(self._registry, self._loop, sessions).run(frames(), send)
        finally:
            sessions.close()


async def _subscription(
    purgatory: NamedPurgatory,
    after: int | None,
    event_filter: EventFilter,
    context: grpc.aio.ServicerContext,
    idle_s: float | None,
    *,
    encode: Callable[[Outcome, bool], bytes],
    turns: WriteTurns,
) -> AsyncIterator[pb.OperationEvent | bytes]:
    """A plain subscriber's events, taken one at a time (:meth:`.Subscriber.pop`) so a cut
    drops everything not yet handed to the transport and the resume point is the last
    event handed over. Every write, headers and closing status included, waits its loop
    turn (:mod:`.write_turns`)."""
    subscriber = purgatory.subscribe(after, event_filter)
    turn = turns.turn
    try:
        await turn()
        await context.send_initial_metadata(
            (
                (METADATA_START_AFTER, str(subscriber.start_after)),
                (METADATA_INCARNATION, purgatory.incarnation),
            )
        )
        metrics = purgatory.metrics
        pop = subscriber.pop
        while True:
            try:
                ready = await subscriber.wait(idle_s)
            except ServiceError:  # closed (cut, purgatory gone): its status waits its turn
                await turn()
                raise
            if not ready:
                # Idle: tell the client the stream is alive and how far it has got.
                yield pb.OperationEvent(heartbeat=True, caught_up_sequence=subscriber.caught_up)
                continue
            outcome = pop()
            if outcome is not None and metrics is not None:
                metrics.subscriber_lag.record(purgatory.last_sequence - outcome.sequence)
            shared = purgatory.subscriber_count > 1
            while outcome is not None:
                await turn()
                yield encode(outcome, shared)
                outcome = pop()
    finally:
        purgatory.unsubscribe(subscriber)
