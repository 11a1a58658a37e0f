"""AsyncBatchingDispatcher: Eureka's task batcher over the Session stream (asyncio).

The same :class:`~purgatory_client._batcher.AcceptorCore` as the blocking
:class:`~purgatory_client.dispatcher.BatchingDispatcher`, driven by an acceptor task and
up to ``max_in_flight`` concurrent batch sends on the event loop; task futures are
:class:`asyncio.Future`. Tests use ``start=False``, an injected clock and
:meth:`AsyncBatchingDispatcher.run_once`.

Thread safety: loop-confined (create, call and await it on one event loop).

Written by hand, not generated like most of the blocking client: the two differ in their
concurrency (a task per batch and two events here, a thread pool under one condition
variable there), which is all they do beyond the shared core; tests/client/test_twins.py
keeps their methods alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import grpc

from purgatory_client._async_session import AsyncSession
from purgatory_client._batcher import (
    AcceptorCore,
    BatchOutcome,
    DispatcherConfig,
    DispatcherCounters,
    ProcessingResult,
    TaskHolder,
)
from purgatory_client._dispatch_tasks import (
    ForceCompleteTask,
    SignalTask,
    Task,
    WatchTask,
    outcome_of_ack,
    outcome_of_error,
    split_batch,
)
from purgatory_client._models import OperationSpec, OperationStatus, Signal
from purgatory_client.dispatcher import monotonic_ms
from purgatory_client.errors import (
    DeadlineExceededError,
    PurgatoryError,
    ServerError,
    UnavailableError,
)

__all__ = ["AsyncBatchTransport", "AsyncBatchingDispatcher", "AsyncSessionTransport"]


class AsyncBatchTransport(Protocol):
    async def process(self, tasks: Sequence[Task]) -> BatchOutcome: ...

    async def close(self) -> None: ...


class AsyncSessionTransport:
    """Batches as frames of one shared Session stream, re-opened after it breaks."""

    def __init__(self, open_session: Callable[[], AsyncSession], ack_timeout_s: float = 30.0):
        self._open = open_session
        self._timeout = ack_timeout_s
        self._session: AsyncSession | None = None

    async def _drop(self, session: AsyncSession) -> None:
        if self._session is session:
            self._session = None
        await session.close()

    async def process(self, tasks: Sequence[Task]) -> BatchOutcome:
        parts = split_batch(tasks)
        if self._session is None or self._session.finished:
            self._session = self._open()
        session = self._session
        try:
            future = await session.submit(
                watches=parts.watches, signals=parts.signals, force_complete=parts.force_complete
            )
            ack = await asyncio.wait_for(future, self._timeout)
        except PurgatoryError as exc:
            await self._drop(session)
            return outcome_of_error(exc)
        except TimeoutError:
            await self._drop(session)
            return outcome_of_error(
                DeadlineExceededError(grpc.StatusCode.DEADLINE_EXCEEDED, "no acknowledgement")
            )
        return outcome_of_ack(parts, ack)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class AsyncBatchingDispatcher:
    """Eureka's batching task dispatcher for asyncio (see BatchingDispatcher)."""

    def __init__(
        self,
        transport: AsyncBatchTransport,
        config: DispatcherConfig | None = None,
        *,
        clock: Callable[[], float] = monotonic_ms,
        on_permanent_error: Callable[[Sequence[TaskHolder], PurgatoryError], None] | None = None,
        start: bool = True,
    ) -> None:
        self.config = config or DispatcherConfig()
        self._transport = transport
        self._core = AcceptorCore(self.config, clock, on_permanent_error)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0
        self._shutdown = False
        self._ids = itertools.count()
        self._workers: set[asyncio.Task[None]] = set()
        self._acceptor = asyncio.ensure_future(self._run()) if start else None

    async def __aenter__(self) -> AsyncBatchingDispatcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def counters(self) -> DispatcherCounters:
        """A snapshot of the counters and gauges (the loop; a metrics reader's thread may
        read it too: it only copies integers)."""
        core = self._core
        return replace(core.counters, pending=core.pending_count(), in_flight=self._in_flight)

    # ------------------------------------------------------------------ producers
    def process(
        self, task_id: Hashable, task: Task, expiry_time: float = math.inf
    ) -> asyncio.Future[Any]:
        if self._shutdown:
            raise RuntimeError("dispatcher is shut down")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._core.process(task_id, task, expiry_time, future)
        self._idle.clear()
        self._wake.set()
        return future

    def _expiry(self, ttl_ms: float | None) -> float:
        return math.inf if ttl_ms is None else self._core.clock() + ttl_ms

    def signal(
        self,
        key: str,
        signal: Signal | None = None,
        *,
        task_id: Hashable | None = None,
        ttl_ms: float | None = None,
    ) -> asyncio.Future[int]:
        tid = ("signal", next(self._ids)) if task_id is None else task_id
        return self.process(tid, SignalTask(key, signal), self._expiry(ttl_ms))

    def watch(
        self, spec: OperationSpec, *, task_id: Hashable | None = None, ttl_ms: float | None = None
    ) -> asyncio.Future[OperationStatus]:
        tid = task_id if task_id is not None else (spec.operation_id or ("watch", next(self._ids)))
        return self.process(tid, WatchTask(spec), self._expiry(ttl_ms))

    def force_complete(
        self, operation_id: str, *, ttl_ms: float | None = None
    ) -> asyncio.Future[bool]:
        task = ForceCompleteTask(operation_id)
        return self.process(("force", operation_id), task, self._expiry(ttl_ms))

    # ------------------------------------------------------------------ driving
    async def run_once(self) -> bool:
        """Send one batch now if one is due (deterministic tests); True if sent."""
        batch = self._core.assign_batch_work()
        if batch is None:
            return False
        await self._send(batch)
        return True

    async def _send(self, batch: list[TaskHolder]) -> None:
        try:
            outcome = await self._transport.process([h.task for h in batch])
        except Exception as exc:  # noqa: BLE001 - a transport bug must fail its batch, not hang it
            error = ServerError(grpc.StatusCode.INTERNAL, f"transport failed: {exc!r}")
            outcome = BatchOutcome(ProcessingResult.PERMANENT_ERROR, error=error)
        self._core.complete(batch, outcome)

    async def _run(self) -> None:
        core = self._core
        while not self._shutdown:
            wait: float | None = None
            if self._in_flight < self.config.max_in_flight:
                batch = core.assign_batch_work()
                if batch is not None:
                    self._in_flight += 1
                    worker = asyncio.ensure_future(self._worker(batch))
                    self._workers.add(worker)
                    worker.add_done_callback(self._workers.discard)
                    continue
                wait = core.wait_time()
            if wait is None and not self._in_flight:
                self._idle.set()
            self._wake.clear()
            timeout = None if wait is None else max(wait, 0.5) / 1000.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _worker(self, batch: list[TaskHolder]) -> None:
        try:
            await self._send(batch)
        finally:
            self._in_flight -= 1
            self._wake.set()

    async def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every accepted task has been sent and answered; False on timeout."""
        try:
            await asyncio.wait_for(self._until_idle(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _until_idle(self) -> None:
        while self._in_flight or self._core.pending_count():
            self._idle.clear()
            self._wake.set()
            await self._idle.wait()

    async def shutdown(self, *, flush_timeout_s: float | None = 10.0) -> None:
        if self._acceptor is not None and not self._shutdown:
            await self.flush(flush_timeout_s)
        self._shutdown = True
        self._core.drop_all(UnavailableError(grpc.StatusCode.UNAVAILABLE, "dispatcher shut down"))
        self._wake.set()
        tasks: list[Awaitable[Any]] = list(self._workers)
        if self._acceptor is not None:
            tasks.append(self._acceptor)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        await self._transport.close()
