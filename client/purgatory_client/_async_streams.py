"""Streaming methods of the client (a mix-in): ``subscribe``, ``watch_many`` and the
batching ``dispatcher``.

``subscribe`` resumes a dropped stream where it stopped (``_resume.ResumeCursor``);
``watch_many`` and the dispatcher ride a Session stream (``session()``, from
``_async_session``); ``subscribe(group=...)`` is a worker group's member (``_async_groups``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

import grpc

from purgatory_client import _liveness, _requests, _responses
from purgatory_client._async_groups import AsyncGroupMethods
from purgatory_client._async_session import AsyncSession, AsyncSessionMethods
from purgatory_client._batcher import DispatcherConfig, TaskHolder
from purgatory_client._liveness import AsyncStreamReader
from purgatory_client._models import Event, OperationSpec, OperationState
from purgatory_client._resume import Backoff, ResumeCursor, ResumePolicy
from purgatory_client._session_base import (
    DEFAULT_FRAME_SIZE,
    AsyncMailbox,
    OutcomeCallback,
    WatchSet,
    raise_refusal,
)
from purgatory_client.async_dispatcher import AsyncBatchingDispatcher, AsyncSessionTransport
from purgatory_client.errors import PurgatoryError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["AsyncStreamMethods"]


class AsyncStreamMethods(AsyncSessionMethods, AsyncGroupMethods):
    """Subscribe to outcomes, watch many operations on one stream, batch signals."""

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

        ``group``: join that worker group instead and yield its deliveries (see
        :meth:`join_group`).
        """
        if group is not None:
            deliveries = await self.join_group(
                group, purgatory=purgatory, heartbeat_interval_ms=heartbeat_interval_ms
            )
            async with deliveries:
                async for delivery in deliveries:
                    yield delivery
            return
        name = self._name(purgatory)
        states, keys = tuple(states), tuple(keys)
        dead_after = _liveness.heartbeat_deadline(heartbeat_interval_ms, dead_after_s)
        cursor = ResumeCursor(after_sequence, resume or self._resume, incarnation)
        hops = 0  # re-sends at once in this attempt (_routing); starts over after a backoff
        while True:
            req = _requests.subscribe_request(
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
            reader = AsyncStreamReader(call, dead_after, "purgatory-subscribe-watchdog")
            try:
                metadata = await call.initial_metadata()
                cursor.started(tuple(metadata or ()))
                while (msg := await reader.next()) is not None:
                    event = _responses.event_from_proto(msg)
                    cursor.advance(event.caught_up_sequence if event.heartbeat else event.sequence)
                    hops = 0
                    yield event
                if reader.silent is None:
                    return
                if sent_to:
                    self._router.drop(name, sent_to)  # a silent owner: re-resolve it
                delay = cursor.retry_delay(reader.silent)  # resumed like a dropped stream
                hops = 0
            except grpc.RpcError as exc:
                if self._router.reroute(name, self._stub.Subscribe, exc, hops, sent_to):
                    hops += 1  # refused, or the routed owner went away: re-send at once
                    delay = 0.0
                else:
                    delay = cursor.retry_delay(from_rpc_error(exc))
                    hops = 0  # the next attempt, after the backoff, has its own budget
            finally:
                call.cancel()
                reader.close()
            await asyncio.sleep(delay)

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
            mailbox = AsyncMailbox()
            session = self.session(purgatory=purgatory, on_outcome=mailbox.put)
            session.add_end_callback(mailbox.wake)
            try:
                acks = []
                for frame in watches.frames(frame_size):
                    future = await session.submit(watches=frame)
                    future.add_done_callback(mailbox.wake_on_done)
                    acks.append(future)
                await session.done_writing()
                while True:
                    for event in await mailbox.take():
                        if watches.ended(event):
                            backoff.progress()
                            yield event
                    raise_refusal(acks)
                    if session.finished and mailbox.empty():
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
        """Eureka's batching dispatcher over a Session stream of this client, started:
        ``shutdown()`` it, or use it as a context manager (asyncio: create it on the
        event loop). Outcomes of the watches it sends go to ``on_outcome`` (called where
        the session reads them: its reader thread, or the event loop), or are dropped."""
        name = self._name(purgatory)
        sink = on_outcome if on_outcome is not None else _discard

        def open_session() -> AsyncSession:
            return self.session(purgatory=name, on_outcome=sink)

        transport = AsyncSessionTransport(open_session, self.timeout or 30.0)
        return AsyncBatchingDispatcher(transport, config, on_permanent_error=on_permanent_error)


def _discard(event: Event) -> None:
    """Outcomes nobody asked for."""
