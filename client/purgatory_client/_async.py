"""AsyncPurgatoryClient: the asyncio client, method for method the same as the sync one.

Every method raises :mod:`purgatory_client.errors` exceptions, never ``grpc.RpcError``.
A long-poll awaits without holding a thread; cancelling the awaiting task cancels the
call (the operation stays in the purgatory).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_client import _base, _listing, _schedules
from purgatory_client._async_session import AsyncSession, OutcomeCallback
from purgatory_client._base import DEFAULT_PURGATORY, ResumeCursor, ResumePolicy
from purgatory_client._batcher import DispatcherConfig, TaskHolder
from purgatory_client._groups_async import AsyncGroupMethods
from purgatory_client._long_poll import LongPollRetry, channel_options
from purgatory_client._models import (
    BatchSignalResult,
    Condition,
    Event,
    ForceCompleteResult,
    OperationSpec,
    OperationState,
    OperationStatus,
    PurgatoryConfig,
    PurgatoryInfo,
    Signal,
)
from purgatory_client._routing import Router, purgatory_of
from purgatory_client._schedules import Schedule, ScheduleUpsert
from purgatory_client._security import resolve_security
from purgatory_client._session_base import DEFAULT_FRAME_SIZE, Backoff, WatchSet
from purgatory_client.async_dispatcher import AsyncBatchingDispatcher, AsyncSessionTransport
from purgatory_client.errors import PurgatoryError, UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["AsyncPurgatoryClient"]


class AsyncPurgatoryClient(AsyncGroupMethods):
    """asyncio client of ``purgatory.v1.PurgatoryService`` (see PurgatoryClient)."""

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        purgatory: str = DEFAULT_PURGATORY,
        timeout: float | None = 30.0,
        channel: grpc.aio.Channel | None = None,
        resume: ResumePolicy | None = None,
        options: Sequence[tuple[str, Any]] = (),
        token: str | None = None,
        tls: bool | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        trust_env: bool = True,
    ) -> None:
        security = resolve_security(
            token=token,
            tls=tls,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            trust_env=trust_env,
        )
        self._metadata = security.metadata
        credentials = security.channel_credentials()
        self._owns_channel = channel is None
        self._channel: grpc.aio.Channel
        if channel is not None:
            self._channel = channel
        elif credentials is not None:
            self._channel = grpc.aio.secure_channel(target, credentials, channel_options(options))
        else:
            self._channel = grpc.aio.insecure_channel(target, channel_options(options))
        self._stub = pb_grpc.PurgatoryServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self.purgatory = purgatory
        self.timeout = timeout
        self._resume = resume or ResumePolicy()
        # Replicated purgatories: follow `purgatory-owner` and cache the route (_routing).
        self._router = Router(
            self._stub,
            lambda address: (
                grpc.aio.secure_channel(address, credentials, channel_options(options))
                if credentials is not None
                else grpc.aio.insecure_channel(address, channel_options(options))
            ),
            pb_grpc.PurgatoryServiceStub,
        )

    # ------------------------------------------------------------ plumbing
    async def __aenter__(self) -> AsyncPurgatoryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_channel:
            await self._channel.close()
        for channel in self._router.channels():
            await channel.close()

    async def _call(
        self, method: Callable[..., Awaitable[Any]], request: Any, timeout: float | None
    ) -> Any:
        purgatory = purgatory_of(request)
        hop = 0
        while True:
            sent_to = self._router.routes.get(purgatory, "")
            try:
                return await self._router.method(purgatory, method)(
                    request, timeout=timeout, metadata=with_trace(self._metadata)
                )
            except grpc.RpcError as exc:
                if not self._router.reroute(purgatory, method, exc, hop, sent_to):
                    raise from_rpc_error(exc) from None
                hop += 1

    def _name(self, purgatory: str | None) -> str:
        return self.purgatory if purgatory is None else purgatory

    async def _long_poll(self, method: Any, request: Any, timeout: float | None) -> Any:
        """``method(request)`` re-sent after UNAVAILABLE (see ``_base.LongPollRetry``)."""
        retry = LongPollRetry(self._resume, timeout)
        while True:
            try:
                return await self._call(method, request, retry.remaining())
            except UnavailableError as exc:
                delay = retry.delay(exc)
            await asyncio.sleep(delay)

    # ------------------------------------------------------------ admin
    async def create_purgatory(
        self, name: str, config: PurgatoryConfig | None = None
    ) -> PurgatoryInfo:
        req = pb.CreatePurgatoryRequest(
            name=_base.name_field("name", name), config=_base.config_to_proto(config)
        )
        resp = await self._call(self._stub.CreatePurgatory, req, self.timeout)
        return _base.info_from_proto(resp.purgatory)

    async def delete_purgatory(self, name: str) -> int:
        req = pb.DeletePurgatoryRequest(name=_base.name_field("name", name))
        return int((await self._call(self._stub.DeletePurgatory, req, self.timeout)).cancelled)

    async def list_purgatories(self) -> list[PurgatoryInfo]:
        resp = await self._call(
            self._stub.ListPurgatories, pb.ListPurgatoriesRequest(), self.timeout
        )
        return [_base.info_from_proto(p) for p in resp.purgatories]

    async def get_purgatory(self, name: str | None = None) -> PurgatoryInfo:
        req = pb.GetPurgatoryRequest(name=_base.name_field("name", self._name(name)))
        resp = await self._call(self._stub.GetPurgatory, req, self.timeout)
        return _base.info_from_proto(resp.purgatory)

    # ------------------------------------------------------------ operations
    async def try_complete_else_watch(
        self,
        keys: Sequence[str],
        timeout_ms: int,
        *,
        condition: Condition | None = None,
        payload: bytes = b"",
        operation_id: str = "",
        wait: bool = False,
        purgatory: str | None = None,
        timeout: float | None = None,
        due_time_ms: int = 0,
        extend_on_resend: bool = False,
        max_extend_ms: int = 0,
    ) -> OperationStatus:
        req = _base.watch_request(
            self._name(purgatory),
            keys=keys,
            timeout_ms=timeout_ms,
            condition=condition,
            payload=payload,
            operation_id=operation_id,
            wait=wait,
            due_time_ms=due_time_ms,
            extend_on_resend=extend_on_resend,
            max_extend_ms=max_extend_ms,
        )
        if wait:
            resp = await self._long_poll(self._stub.TryCompleteElseWatch, req, timeout)
        else:
            deadline = self.timeout if timeout is None else timeout
            resp = await self._call(self._stub.TryCompleteElseWatch, req, deadline)
        return _base.status_from_proto(resp, payload)

    async def wait(
        self,
        keys: Sequence[str],
        timeout_ms: int,
        *,
        condition: Condition | None = None,
        payload: bytes = b"",
        operation_id: str = "",
        purgatory: str | None = None,
        timeout: float | None = None,
    ) -> OperationStatus:
        """The long-poll: register and return only once the operation has ended."""
        return await self.try_complete_else_watch(
            keys,
            timeout_ms,
            condition=condition,
            payload=payload,
            operation_id=operation_id,
            wait=True,
            purgatory=purgatory,
            timeout=timeout,
        )

    async def batch_try_complete_else_watch(
        self,
        operations: Iterable[OperationSpec],
        *,
        wait: bool = False,
        purgatory: str | None = None,
        timeout: float | None = None,
    ) -> list[OperationStatus]:
        req = _base.batch_watch_request(self._name(purgatory), operations, wait)
        if wait:
            resp = await self._long_poll(self._stub.BatchTryCompleteElseWatch, req, timeout)
        else:
            deadline = self.timeout if timeout is None else timeout
            resp = await self._call(self._stub.BatchTryCompleteElseWatch, req, deadline)
        return _base.statuses_from_proto(resp)

    async def check_and_complete(
        self, key: str, signal: Signal | None = None, *, purgatory: str | None = None
    ) -> int:
        req = _base.signal_request(self._name(purgatory), key, signal)
        return int((await self._call(self._stub.CheckAndComplete, req, self.timeout)).completed)

    async def batch_check_and_complete(
        self,
        signals: Iterable[tuple[str, Signal | None] | str],
        *,
        purgatory: str | None = None,
    ) -> BatchSignalResult:
        req = _base.batch_signal_request(self._name(purgatory), signals)
        resp = await self._call(self._stub.BatchCheckAndComplete, req, self.timeout)
        return _base.batch_signal_from_proto(resp)

    async def force_complete(
        self, operation_id: str, *, purgatory: str | None = None
    ) -> ForceCompleteResult:
        req = pb.ForceCompleteRequest(
            purgatory=_base.name_field("purgatory", self._name(purgatory)),
            operation_id=_base.name_field("operation_id", operation_id),
        )
        return _base.force_from_proto(await self._call(self._stub.ForceComplete, req, self.timeout))

    async def get_operation(
        self, operation_id: str, *, purgatory: str | None = None
    ) -> OperationStatus:
        req = pb.GetOperationRequest(
            purgatory=_base.name_field("purgatory", self._name(purgatory)),
            operation_id=_base.name_field("operation_id", operation_id),
        )
        resp = await self._call(self._stub.GetOperation, req, self.timeout)
        return _base.status_from_proto(resp.operation)

    # ------------------------------------------------------------ delayed messages
    async def cancel(
        self,
        operation_ids: Iterable[str] | None = None,
        *,
        key: str | None = None,
        prefix: str | None = None,
        purgatory: str | None = None,
    ) -> list[OperationStatus]:
        """End pending operations as CANCELLED: by ids, every one watching ``key``, or
        every one whose id starts with ``prefix`` (exactly one). Returns those this call
        ended (each with its outcome's sequence); calling it again returns none."""
        req = _base.cancel_request(self._name(purgatory), operation_ids, key, prefix)
        resp = await self._call(self._stub.Cancel, req, self.timeout)
        return [_base.status_from_proto(s) for s in resp.cancelled]

    async def reschedule(
        self,
        operation_id: str,
        *,
        timeout_ms: int | None = None,
        due_time_ms: int | None = None,
        purgatory: str | None = None,
    ) -> OperationStatus:
        """Move a pending operation's deadline (from now, or to an absolute epoch-ms due
        time on the server's clock); FailedPreconditionError once it has ended."""
        req = _base.reschedule_request(self._name(purgatory), operation_id, timeout_ms, due_time_ms)
        resp = await self._call(self._stub.Reschedule, req, self.timeout)
        return _base.status_from_proto(resp.operation)

    # ------------------------------------------------------------ recurring schedules
    async def upsert_schedule(
        self,
        schedule_id: str,
        *,
        every_ms: int | None = None,
        cron: str | None = None,
        time_zone: str = "",
        keys: Iterable[str] = (),
        condition: Condition | None = None,
        payload: bytes = b"",
        purgatory: str | None = None,
    ) -> ScheduleUpsert:
        """Create or replace a recurring schedule: every ``every_ms`` (on the epoch grid)
        or at the times a five-field ``cron`` expression names in ``time_zone`` (IANA;
        "" is UTC). Each firing is an operation "<schedule_id>@<fire ms>" due at its fire
        time, watching ``keys`` (``condition`` met early: COMPLETED instead of EXPIRED).
        Re-sending the same definition changes nothing (``changed`` False)."""
        req = _schedules.upsert_schedule_request(
            self._name(purgatory),
            schedule_id,
            every_ms=every_ms,
            cron=cron,
            time_zone=time_zone,
            keys=keys,
            condition=condition,
            payload=payload,
        )
        resp = await self._call(self._stub.UpsertSchedule, req, self.timeout)
        return ScheduleUpsert(
            _schedules.schedule_from_proto(resp.schedule), resp.created, resp.changed
        )

    async def delete_schedule(
        self, schedule_id: str, *, purgatory: str | None = None
    ) -> OperationStatus | None:
        """Delete a schedule (NotFoundError if unknown); returns its armed occurrence,
        now CANCELLED, if one was pending."""
        req = _schedules.delete_schedule_request(self._name(purgatory), schedule_id)
        resp = await self._call(self._stub.DeleteSchedule, req, self.timeout)
        if not resp.HasField("cancelled"):
            return None
        return _base.status_from_proto(resp.cancelled)

    async def list_schedules(self, *, purgatory: str | None = None) -> list[Schedule]:
        """Every schedule of the purgatory, in id order, with its next occurrence."""
        req = _schedules.list_schedules_request(self._name(purgatory))
        resp = await self._call(self._stub.ListSchedules, req, self.timeout)
        return [_schedules.schedule_from_proto(s) for s in resp.schedules]

    async def list_operations(
        self,
        *,
        key: str = "",
        prefix: str = "",
        states: Iterable[OperationState] = (),
        due_after_ms: int = 0,
        due_before_ms: int = 0,
        page_token: str = "",
        page_size: int = 0,
        purgatory: str | None = None,
    ) -> _listing.OperationPage:
        """One page of pending operations (``states`` empty) or recently ended ones, in
        operation id order, each with its progress so far. Filters: ``key`` watched,
        id ``prefix``, ``states``, due time ``due_after_ms <= due < due_before_ms`` (epoch
        ms on the server's clock; 0: no bound). ``page_size`` 0 means the server's
        default (100; at most 1000). Pass ``next_page_token`` back, with the same
        filters, for the next page; a page may be short or empty while it is set."""
        req = _listing.list_request(
            self._name(purgatory),
            key=key,
            prefix=prefix,
            states=states,
            due_after_ms=due_after_ms,
            due_before_ms=due_before_ms,
            page_token=page_token,
            page_size=page_size,
        )
        resp = await self._call(self._stub.ListOperations, req, self.timeout)
        return _listing.page_from_proto(resp, _base.status_from_proto)

    async def iter_operations(
        self,
        *,
        key: str = "",
        prefix: str = "",
        states: Iterable[OperationState] = (),
        due_after_ms: int = 0,
        due_before_ms: int = 0,
        page_size: int = 0,
        purgatory: str | None = None,
    ) -> AsyncIterator[OperationStatus]:
        """Every operation :meth:`list_operations` selects, page after page. Stable while
        operations come and go: one pending throughout is yielded exactly once."""
        states = tuple(states)
        token = ""
        while True:
            page = await self.list_operations(
                key=key,
                prefix=prefix,
                states=states,
                due_after_ms=due_after_ms,
                due_before_ms=due_before_ms,
                page_token=token,
                page_size=page_size,
                purgatory=purgatory,
            )
            for status in page.operations:
                yield status
            token = page.next_page_token
            if not token:
                return

    # ------------------------------------------------------------ streams
    async def subscribe(
        self,
        *,
        after_sequence: int | None = None,
        states: Iterable[OperationState] = (),
        keys: Iterable[str] = (),
        operation_id_prefix: str = "",
        purgatory: str | None = None,
        incarnation: str | None = None,
        resume: ResumePolicy | None = None,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
        group: str | None = None,
    ) -> AsyncIterator[Event]:
        """Outcomes in sequence order, resuming transparently after a dropped stream.

        ``incarnation``, ``resume``, :class:`~purgatory_client.StreamResetError`,
        heartbeats and ``dead_after_s``: as :meth:`PurgatoryClient.subscribe`.
        """
        if group is not None:  # a worker group's member: see join_group (AsyncDelivery)
            deliveries = await self.join_group(
                group, purgatory=purgatory, heartbeat_interval_ms=heartbeat_interval_ms
            )
            async with deliveries:
                async for delivery in deliveries:
                    yield delivery
            return
        name = self._name(purgatory)
        states, keys = tuple(states), tuple(keys)
        dead_after = _base.heartbeat_deadline(heartbeat_interval_ms, dead_after_s)
        cursor = ResumeCursor(after_sequence, resume or self._resume, incarnation)
        hops = 0  # re-sends to a named owner since the last event (_routing)
        while True:
            req = _base.subscribe_request(
                name,
                cursor.position,
                states,
                keys,
                operation_id_prefix,
                incarnation=cursor.incarnation,
                heartbeat_interval_ms=heartbeat_interval_ms,
            )
            sent_to = self._router.routes.get(name, "")
            method = self._router.method(name, self._stub.Subscribe)
            call = method(req, metadata=with_trace(self._metadata))
            try:
                cursor.started(tuple((await call.initial_metadata()) or ()))
                messages = call.__aiter__()
                while True:
                    try:
                        msg = await asyncio.wait_for(messages.__anext__(), dead_after)
                    except StopAsyncIteration:
                        return
                    event = _base.event_from_proto(msg)
                    cursor.advance(event.caught_up_sequence if event.heartbeat else event.sequence)
                    hops = 0
                    yield event
            except TimeoutError:
                assert dead_after is not None  # only wait_for with a deadline times out
                delay = cursor.retry_delay(_base.dead_stream(dead_after))
            except grpc.RpcError as exc:
                if self._router.reroute(name, self._stub.Subscribe, exc, hops, sent_to):
                    hops += 1  # refused, or the routed owner went away: re-send at once
                    delay = 0.0
                else:
                    delay = cursor.retry_delay(from_rpc_error(exc))
            finally:
                call.cancel()
            await asyncio.sleep(delay)

    # ------------------------------------------------------------ session stream
    def session(
        self,
        *,
        purgatory: str | None = None,
        on_outcome: OutcomeCallback | None = None,
        outcome_buffer: int = 10_000,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
    ) -> AsyncSession:
        """Open a Session stream (many watches, signals and force-completes per message;
        each watched operation's outcome as soon as it ends). Must be called on the loop.

        ``heartbeat_interval_ms`` (0: none): the server sends a heartbeat whenever the
        stream was idle that long (``session.liveness`` counts them); ``dead_after_s``
        (needs heartbeats): a stream silent that long is treated as dead and ends with
        :class:`UnavailableError`, failing its unanswered acknowledgements."""
        name = self._name(purgatory)
        session = AsyncSession(
            None,
            name,
            connect=lambda: self._session_call(name),
            on_outcome=on_outcome,
            outcome_buffer=outcome_buffer,
            heartbeat_interval_ms=heartbeat_interval_ms,
            dead_after_s=dead_after_s,
        )
        session.add_end_callback(lambda: self._router.learn(name, session.error))
        return session

    async def _session_call(self, name: str) -> Any:
        """The Session call, opened where ``name`` lives (a probe first if unknown)."""
        if self._router.needs_probe(name):
            try:
                await self._call(
                    self._stub.GetPurgatory, pb.GetPurgatoryRequest(name=name), self.timeout
                )
                self._router.probed(name)
            except PurgatoryError:
                pass  # the session's frames get the error themselves
        return self._router.method(name, self._stub.Session)(metadata=self._metadata)

    async def watch_many(
        self,
        operations: Iterable[OperationSpec],
        *,
        frame_size: int = DEFAULT_FRAME_SIZE,
        purgatory: str | None = None,
    ) -> AsyncIterator[Event]:
        """Register every operation on one stream and yield each outcome as it ends.

        Operations without an id get a client-made one, so that a stream dropped by a
        server restart (UNAVAILABLE) or for reading too slowly (RESOURCE_EXHAUSTED) is
        re-opened and the watches still open are re-sent by id (no duplicates; ended
        ones answer at once), with the client's ``ResumePolicy`` backoff. A frame the
        server refuses (e.g. INVALID_ARGUMENT) raises its error.
        """
        watches = WatchSet(operations)
        backoff = Backoff(self._resume)
        while len(watches):
            ready: list[Event] = []
            wake = asyncio.Event()

            def arrived(
                event: Event, ready: list[Event] = ready, wake: asyncio.Event = wake
            ) -> None:
                ready.append(event)
                wake.set()

            session = self.session(purgatory=purgatory, on_outcome=arrived)
            session.add_end_callback(wake.set)
            try:
                acks = []
                for frame in watches.frames(frame_size):
                    future = await session.submit(watches=frame)
                    future.add_done_callback(lambda _, w=wake: w.set())  # type: ignore[misc]
                    acks.append(future)
                await session.done_writing()
                while True:
                    await wake.wait()
                    wake.clear()
                    batch, ready[:] = list(ready), []
                    for event in batch:
                        if watches.ended(event):
                            backoff.progress()
                            yield event
                    for future in acks:
                        if future.done() and not future.exception():
                            error = future.result().error
                            if error is not None:
                                raise error
                    if session.finished and not ready:
                        break
                if session.error is None:
                    if len(watches):
                        raise PurgatoryError(
                            grpc.StatusCode.INTERNAL, f"{len(watches)} watches left unanswered"
                        )
                    return
                delay = backoff.delay(session.error)
            except PurgatoryError as exc:
                if exc is not session.error:
                    raise
                delay = backoff.delay(exc)
            finally:
                await session.close()
            await asyncio.sleep(delay)

    def dispatcher(
        self,
        config: DispatcherConfig | None = None,
        *,
        purgatory: str | None = None,
        on_outcome: OutcomeCallback | None = None,
        on_permanent_error: Callable[[Sequence[TaskHolder], PurgatoryError], None] | None = None,
    ) -> AsyncBatchingDispatcher:
        """Eureka's batching dispatcher over a Session stream (see the sync client's);
        call on the event loop, ``await shutdown()`` or use ``async with``."""
        name = self._name(purgatory)
        sink = on_outcome if on_outcome is not None else _discard

        def open_session() -> AsyncSession:
            return self.session(purgatory=name, on_outcome=sink)

        transport = AsyncSessionTransport(open_session, self.timeout or 30.0)
        return AsyncBatchingDispatcher(transport, config, on_permanent_error=on_permanent_error)


def _discard(event: Event) -> None:
    """Outcomes nobody asked for."""
