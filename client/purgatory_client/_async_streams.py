"""Streaming methods of the client (a mix-in): ``subscribe``, ``watch_many`` and the
batching ``dispatcher``.

``subscribe`` resumes a dropped stream where it stopped (``_resume.ResumeCursor``);
``watch_many`` and the dispatcher ride a Session stream (``session()``, from
``_async_session``); ``subscribe(group=...)`` is a worker group's member (``_async_groups``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

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
    new_session_id,
    raise_refusal,
    settle,
)
from purgatory_client.async_dispatcher import AsyncBatchingDispatcher, AsyncSessionTransport
from purgatory_client.errors import (
    FailedPreconditionError,
    NotFoundError,
    OutOfRangeError,
    PurgatoryError,
    from_rpc_error,
)
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
        buffer: int = 10_000,
    ) -> AsyncIterator[Event]:
        """Register every operation on one stream and yield each outcome as it ends.

        Operations without an id get a client-made one. The stream is a named session
        (``session_id``): one that ends early (a server restart, a lost connection, a
        cut) is *resumed* on a new stream from the last outcome received, with the
        client's ``ResumePolicy`` backoff: the server sends what was missed and nothing
        is registered again; only watches whose frame was never acknowledged are sent
        again. If the server cannot resume it (restarted, the session expired), the
        watches still open are re-sent by id on a fresh session (the server's dedup
        window answers those that ended). A frame the server refuses (e.g.
        INVALID_ARGUMENT) raises its error.

        Flow control: at most ``buffer`` outcomes wait here for the caller to take them;
        past that the stream is not read, and the server stops reading frames in turn.
        """
        watches = WatchSet(operations)
        backoff = Backoff(self._resume)
        session_id = new_session_id()
        resume_after: int | None = None
        while len(watches):
            mailbox = AsyncMailbox(buffer)
            session = self.session(
                purgatory=purgatory,
                on_outcome=mailbox.put,
                session_id=session_id,
                resume_after=resume_after,
            )
            session.add_end_callback(mailbox.wake)
            acks: list[Any] = []
            try:
                frames = watches.frames(frame_size, resumed=resume_after is not None)
                acks = await session.submit_all(frames, mailbox.wake_on_done)
                async for event in _drain(session, mailbox, watches, acks, backoff):
                    yield event
                if session.error is None:
                    if len(watches):
                        raise PurgatoryError(
                            grpc.StatusCode.INTERNAL, f"{len(watches)} watches left unanswered"
                        )
                    return
                delay = backoff.delay(session.error)
                resume_after = session.delivered
            except (NotFoundError, OutOfRangeError, FailedPreconditionError) as exc:
                if exc is not session.error or resume_after is None:
                    raise
                if isinstance(exc, FailedPreconditionError) and not backoff.exhausted():
                    # The server has not yet seen the old stream end: resume a bit later.
                    delay = backoff.delay(exc, resumable=True)
                else:
                    # It cannot resume the session: re-send every open watch, new session.
                    session_id, resume_after, delay = new_session_id(), None, 0.0
            except PurgatoryError as exc:
                if exc is not session.error:
                    raise
                delay = backoff.delay(exc)
                resume_after = session.delivered
            finally:
                mailbox.close()  # (a reader waiting for room would hold up the close)
                await session.close()
                settle(acks)
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


async def _drain(
    session: AsyncSession,
    mailbox: AsyncMailbox,
    watches: WatchSet,
    acks: list[Any],
    backoff: Backoff,
) -> AsyncIterator[Event]:
    """The outcomes of one stream of ``watch_many`` as they arrive, until it finished and
    nothing waits; raises a refused frame's error."""
    noted = 0
    while True:
        for event in await mailbox.take():
            if watches.ended(event):
                backoff.progress()
                yield event
        noted = watches.note(acks, noted)
        raise_refusal(acks)
        if session.finished and mailbox.empty():
            return
