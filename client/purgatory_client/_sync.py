"""PurgatoryClient: the blocking client (one grpc channel, thread-safe like grpc's own).

Every method raises :mod:`purgatory_client.errors` exceptions, never ``grpc.RpcError``.
Method names and arguments are identical to :class:`AsyncPurgatoryClient`'s.
"""

from __future__ import annotations

import functools
import os
import queue
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_client import _base, _listing, _schedules
from purgatory_client._base import DEFAULT_PURGATORY, ResumeCursor, ResumePolicy
from purgatory_client._batcher import DispatcherConfig, TaskHolder
from purgatory_client._groups_sync import GroupMethods
from purgatory_client._liveness import Watchdog
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
from purgatory_client._sync_session import SyncSession
from purgatory_client.dispatcher import BatchingDispatcher, SessionTransport
from purgatory_client.errors import PurgatoryError, UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["PurgatoryClient"]

R = TypeVar("R")


class PurgatoryClient(GroupMethods):
    """Blocking client of ``purgatory.v1.PurgatoryService``.

    ``timeout`` is the default deadline (seconds) of short calls; long-polls
    (``wait=True``) and ``subscribe`` have no deadline unless one is passed.

    A long-poll that fails with UNAVAILABLE (a server restart) is re-sent with the same
    operation id (one is made up if none is given): by gRPC's retry policy, which the
    client puts in its channel's service config, and then by the ``resume`` policy
    (:class:`ResumePolicy`; docs/clients.md "What every client must do right").

    Security (see :mod:`purgatory_client._security`): ``token`` is sent as
    ``authorization: Bearer <token>`` with every call; ``tls_ca`` (PEM file of trusted
    CAs), ``tls_cert``/``tls_key`` (client certificate for mutual TLS) or ``tls=True``
    (system roots) connect over TLS. Left out, they come from ``PURGATORY_TOKEN``,
    ``PURGATORY_TLS_CA``, ``PURGATORY_TLS_CERT`` and ``PURGATORY_TLS_KEY`` unless
    ``trust_env=False``.
    """

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        purgatory: str = DEFAULT_PURGATORY,
        timeout: float | None = 30.0,
        channel: grpc.Channel | None = None,
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
        if channel is not None:
            self._channel = channel
        elif credentials is not None:
            self._channel = grpc.secure_channel(target, credentials, channel_options(options))
        else:
            self._channel = grpc.insecure_channel(target, channel_options(options))
        self._stub = pb_grpc.PurgatoryServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self.purgatory = purgatory
        self.timeout = timeout
        self._resume = resume or ResumePolicy()
        # Replicated purgatories: follow `purgatory-owner` and cache the route (_routing).
        self._router = Router(
            self._stub,
            lambda address: (
                grpc.secure_channel(address, credentials, channel_options(options))
                if credentials is not None
                else grpc.insecure_channel(address, channel_options(options))
            ),
            pb_grpc.PurgatoryServiceStub,
        )

    # ------------------------------------------------------------ plumbing
    def __enter__(self) -> PurgatoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_channel:
            self._channel.close()
        for channel in self._router.channels():
            channel.close()

    def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        purgatory = purgatory_of(request)
        hop = 0
        while True:
            sent_to = self._router.routes.get(purgatory, "")
            try:
                return self._router.method(purgatory, method)(
                    request, timeout=timeout, metadata=with_trace(self._metadata)
                )
            except grpc.RpcError as exc:
                if not self._router.reroute(purgatory, method, exc, hop, sent_to):
                    raise from_rpc_error(exc) from None
                hop += 1

    def _name(self, purgatory: str | None) -> str:
        return self.purgatory if purgatory is None else purgatory

    def _long_poll(self, method: Any, request: Any, timeout: float | None) -> Any:
        """``method(request)`` re-sent after UNAVAILABLE (see ``_base.LongPollRetry``)."""
        retry = LongPollRetry(self._resume, timeout)
        while True:
            try:
                return self._call(method, request, retry.remaining())
            except UnavailableError as exc:
                delay = retry.delay(exc)
            time.sleep(delay)

    # ------------------------------------------------------------ admin
    def create_purgatory(self, name: str, config: PurgatoryConfig | None = None) -> PurgatoryInfo:
        req = pb.CreatePurgatoryRequest(
            name=_base.name_field("name", name), config=_base.config_to_proto(config)
        )
        return _base.info_from_proto(
            self._call(self._stub.CreatePurgatory, req, self.timeout).purgatory
        )

    def delete_purgatory(self, name: str) -> int:
        """Delete; returns how many pending operations ended CANCELLED."""
        req = pb.DeletePurgatoryRequest(name=_base.name_field("name", name))
        return int(self._call(self._stub.DeletePurgatory, req, self.timeout).cancelled)

    def list_purgatories(self) -> list[PurgatoryInfo]:
        resp = self._call(self._stub.ListPurgatories, pb.ListPurgatoriesRequest(), self.timeout)
        return [_base.info_from_proto(p) for p in resp.purgatories]

    def get_purgatory(self, name: str | None = None) -> PurgatoryInfo:
        req = pb.GetPurgatoryRequest(name=_base.name_field("name", self._name(name)))
        return _base.info_from_proto(
            self._call(self._stub.GetPurgatory, req, self.timeout).purgatory
        )

    # ------------------------------------------------------------ operations
    def try_complete_else_watch(
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
        """Register an operation; with ``wait=True`` block until it ends.

        ``due_time_ms`` (with ``timeout_ms=0``): an absolute deadline, Unix epoch ms,
        judged on the server's wall clock (not this machine's).
        ``extend_on_resend`` (debounce): a re-send of this ``operation_id`` while it is
        pending pushes the deadline to now + ``timeout_ms``, never past its creation
        time + ``max_extend_ms`` (0: no cap); the policy is the one it was created with.
        """
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
            resp = self._long_poll(self._stub.TryCompleteElseWatch, req, timeout)
        else:
            deadline = self.timeout if timeout is None else timeout
            resp = self._call(self._stub.TryCompleteElseWatch, req, deadline)
        return _base.status_from_proto(resp, payload)

    def wait(
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
        return self.try_complete_else_watch(
            keys,
            timeout_ms,
            condition=condition,
            payload=payload,
            operation_id=operation_id,
            wait=True,
            purgatory=purgatory,
            timeout=timeout,
        )

    def batch_try_complete_else_watch(
        self,
        operations: Iterable[OperationSpec],
        *,
        wait: bool = False,
        purgatory: str | None = None,
        timeout: float | None = None,
    ) -> list[OperationStatus]:
        req = _base.batch_watch_request(self._name(purgatory), operations, wait)
        if wait:
            resp = self._long_poll(self._stub.BatchTryCompleteElseWatch, req, timeout)
        else:
            deadline = self.timeout if timeout is None else timeout
            resp = self._call(self._stub.BatchTryCompleteElseWatch, req, deadline)
        return _base.statuses_from_proto(resp)

    def check_and_complete(
        self, key: str, signal: Signal | None = None, *, purgatory: str | None = None
    ) -> int:
        """Signal ``key``; returns how many operations this completed."""
        req = _base.signal_request(self._name(purgatory), key, signal)
        return int(self._call(self._stub.CheckAndComplete, req, self.timeout).completed)

    def batch_check_and_complete(
        self,
        signals: Iterable[tuple[str, Signal | None] | str],
        *,
        purgatory: str | None = None,
    ) -> BatchSignalResult:
        req = _base.batch_signal_request(self._name(purgatory), signals)
        return _base.batch_signal_from_proto(
            self._call(self._stub.BatchCheckAndComplete, req, self.timeout)
        )

    def force_complete(
        self, operation_id: str, *, purgatory: str | None = None
    ) -> ForceCompleteResult:
        req = pb.ForceCompleteRequest(
            purgatory=_base.name_field("purgatory", self._name(purgatory)),
            operation_id=_base.name_field("operation_id", operation_id),
        )
        return _base.force_from_proto(self._call(self._stub.ForceComplete, req, self.timeout))

    def get_operation(self, operation_id: str, *, purgatory: str | None = None) -> OperationStatus:
        req = pb.GetOperationRequest(
            purgatory=_base.name_field("purgatory", self._name(purgatory)),
            operation_id=_base.name_field("operation_id", operation_id),
        )
        resp = self._call(self._stub.GetOperation, req, self.timeout)
        return _base.status_from_proto(resp.operation)

    # ------------------------------------------------------------ delayed messages
    def cancel(
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
        resp = self._call(self._stub.Cancel, req, self.timeout)
        return [_base.status_from_proto(s) for s in resp.cancelled]

    def reschedule(
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
        resp = self._call(self._stub.Reschedule, req, self.timeout)
        return _base.status_from_proto(resp.operation)

    # ------------------------------------------------------------ recurring schedules
    def upsert_schedule(
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
        resp = self._call(self._stub.UpsertSchedule, req, self.timeout)
        return ScheduleUpsert(
            _schedules.schedule_from_proto(resp.schedule), resp.created, resp.changed
        )

    def delete_schedule(
        self, schedule_id: str, *, purgatory: str | None = None
    ) -> OperationStatus | None:
        """Delete a schedule (NotFoundError if unknown); returns its armed occurrence,
        now CANCELLED, if one was pending."""
        req = _schedules.delete_schedule_request(self._name(purgatory), schedule_id)
        resp = self._call(self._stub.DeleteSchedule, req, self.timeout)
        if not resp.HasField("cancelled"):
            return None
        return _base.status_from_proto(resp.cancelled)

    def list_schedules(self, *, purgatory: str | None = None) -> list[Schedule]:
        """Every schedule of the purgatory, in id order, with its next occurrence."""
        req = _schedules.list_schedules_request(self._name(purgatory))
        resp = self._call(self._stub.ListSchedules, req, self.timeout)
        return [_schedules.schedule_from_proto(s) for s in resp.schedules]

    def list_operations(
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
        resp = self._call(self._stub.ListOperations, req, self.timeout)
        return _listing.page_from_proto(resp, _base.status_from_proto)

    def iter_operations(
        self,
        *,
        key: str = "",
        prefix: str = "",
        states: Iterable[OperationState] = (),
        due_after_ms: int = 0,
        due_before_ms: int = 0,
        page_size: int = 0,
        purgatory: str | None = None,
    ) -> Iterator[OperationStatus]:
        """Every operation :meth:`list_operations` selects, page after page. Stable while
        operations come and go: one pending throughout is yielded exactly once."""
        states = tuple(states)
        token = ""
        while True:
            page = self.list_operations(
                key=key,
                prefix=prefix,
                states=states,
                due_after_ms=due_after_ms,
                due_before_ms=due_before_ms,
                page_token=token,
                page_size=page_size,
                purgatory=purgatory,
            )
            yield from page.operations
            token = page.next_page_token
            if not token:
                return

    # ------------------------------------------------------------ streams
    def subscribe(
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
    ) -> Iterator[Event]:
        """Outcomes in sequence order, resuming transparently after a dropped stream.

        ``after_sequence=None`` starts from now on. Closing the iterator ends the call.
        ``incarnation`` (``PurgatoryInfo.incarnation`` when ``after_sequence`` was saved)
        makes the server check that ``after_sequence`` still means the same stream;
        either way, the resumes after a dropped stream pass the stream's incarnation and
        raise :class:`~purgatory_client.StreamResetError` if it was reset meanwhile.
        ``resume`` overrides the client's :class:`ResumePolicy` for this stream (e.g.
        ``ResumePolicy.forever()`` to ride out any outage).

        ``heartbeat_interval_ms``: the server sends a heartbeat when the stream was idle
        that long; it is yielded as an :class:`Event` with ``heartbeat=True`` and
        ``caught_up_sequence``. ``dead_after_s`` (needs heartbeats): a stream silent that
        long is treated as dead and resumed like a dropped connection (an
        :class:`UnavailableError` once the resume attempts are spent).
        """
        if group is not None:  # a worker group's member: see join_group (Delivery events)
            with self.join_group(
                group, purgatory=purgatory, heartbeat_interval_ms=heartbeat_interval_ms
            ) as deliveries:
                yield from deliveries
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
            watchdog = (
                None
                if dead_after is None
                else Watchdog(call, dead_after, "purgatory-subscribe-watchdog")
            )
            try:
                cursor.started(call.initial_metadata() or ())
                for msg in call:
                    if watchdog is not None:
                        watchdog.alive()
                    event = _base.event_from_proto(msg)
                    cursor.advance(event.caught_up_sequence if event.heartbeat else event.sequence)
                    hops = 0
                    yield event
                return
            except grpc.RpcError as exc:
                if watchdog is not None and watchdog.fired and dead_after is not None:
                    delay = cursor.retry_delay(_base.dead_stream(dead_after))
                elif self._router.reroute(name, self._stub.Subscribe, exc, hops, sent_to):
                    hops += 1  # refused, or the routed owner went away: re-send at once
                    delay = 0.0
                else:
                    delay = cursor.retry_delay(from_rpc_error(exc))
            finally:
                if watchdog is not None:
                    watchdog.stop()
                call.cancel()
            time.sleep(delay)

    # ------------------------------------------------------------ session stream
    def session(
        self,
        *,
        purgatory: str | None = None,
        on_outcome: Callable[[Event], None] | None = None,
        outcome_buffer: int = 10_000,
        heartbeat_interval_ms: int = 0,
        dead_after_s: float | None = None,
    ) -> SyncSession:
        """Open a Session stream (see :meth:`AsyncPurgatoryClient.session`)."""
        name = self._name(purgatory)
        if self._router.needs_probe(name):  # find the owner first (_routing)
            try:
                self._call(self._stub.GetPurgatory, pb.GetPurgatoryRequest(name=name), self.timeout)
                self._router.probed(name)
            except PurgatoryError:
                pass  # the session's frames get the error themselves
        session = SyncSession(
            functools.partial(
                self._router.method(name, self._stub.Session), metadata=self._metadata
            ),
            name,
            on_outcome=on_outcome,
            outcome_buffer=outcome_buffer,
            heartbeat_interval_ms=heartbeat_interval_ms,
            dead_after_s=dead_after_s,
            timeout=self.timeout,
        )
        session.add_end_callback(lambda: self._router.learn(name, session.error))
        return session

    def watch_many(
        self,
        operations: Iterable[OperationSpec],
        *,
        frame_size: int = DEFAULT_FRAME_SIZE,
        purgatory: str | None = None,
    ) -> Iterator[Event]:
        """Register every operation on one stream and yield each outcome as it ends
        (see :meth:`AsyncPurgatoryClient.watch_many`: same re-open and re-send rules)."""
        watches = WatchSet(operations)
        backoff = Backoff(self._resume)
        while len(watches):
            inbox: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
            session = self.session(purgatory=purgatory, on_outcome=inbox.put)
            session.add_end_callback(lambda q=inbox: q.put(None))  # type: ignore[misc]
            try:
                acks = [session.submit(watches=frame) for frame in watches.frames(frame_size)]
                for future in acks:
                    future.add_done_callback(lambda _, q=inbox: q.put(None))  # type: ignore[misc]
                session.done_writing()
                while True:
                    item = inbox.get()
                    if item is not None:
                        if watches.ended(item):
                            backoff.progress()
                            yield item
                        continue
                    for future in acks:
                        if future.done() and not future.exception():
                            error = future.result().error
                            if error is not None:
                                raise error
                    if session.finished and inbox.empty():
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
                session.close()
            time.sleep(delay)

    def dispatcher(
        self,
        config: DispatcherConfig | None = None,
        *,
        purgatory: str | None = None,
        on_outcome: Callable[[Event], None] | None = None,
        on_permanent_error: Callable[[Sequence[TaskHolder], PurgatoryError], None] | None = None,
    ) -> BatchingDispatcher:
        """Eureka's batching dispatcher over a Session stream of this client (started;
        ``shutdown()`` it, or use it as a context manager). Outcomes of watches it sends
        go to ``on_outcome`` (on the stream's reader thread), or are dropped."""
        name = self._name(purgatory)
        sink = on_outcome if on_outcome is not None else _discard

        def open_session() -> SyncSession:
            return self.session(purgatory=name, on_outcome=sink)

        transport = SessionTransport(open_session, self.timeout or 30.0)
        return BatchingDispatcher(transport, config, on_permanent_error=on_permanent_error)


def _discard(event: Event) -> None:
    """Outcomes nobody asked for."""
