"""BatchingDispatcher: Eureka's task batcher over the Session stream (blocking API).

Producers call :meth:`BatchingDispatcher.signal` (or ``watch``/``force_complete``/
``process``) from any thread and get a :class:`concurrent.futures.Future`; an acceptor
thread runs :class:`~purgatory_client._batcher.AcceptorCore` and hands batches to up to
``max_in_flight`` worker threads, each sending one batch as one Session frame and waiting
for its acknowledgement. See :mod:`purgatory_client._batcher` for the queues, coalescing by
task id, overflow, expiry, retries and the traffic shaper.

Tests build one with ``start=False`` and an injected ``clock`` and drive it with
:meth:`BatchingDispatcher.run_once`: no threads, no sleeps.

Thread safety: public methods are thread-safe; the core is only touched under one
condition variable.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, Protocol

import grpc

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
from purgatory_client._sync_session import SyncSession
from purgatory_client.errors import (
    DeadlineExceededError,
    PurgatoryError,
    ServerError,
    UnavailableError,
)

__all__ = ["BatchTransport", "BatchingDispatcher", "SessionTransport", "monotonic_ms"]


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class BatchTransport(Protocol):
    """Sends one batch and says how it went (Eureka's ``TaskProcessor.process(list)``)."""

    def process(self, tasks: Sequence[Task]) -> BatchOutcome: ...

    def close(self) -> None: ...


class SessionTransport:
    """Batches as frames of one shared Session stream, re-opened after it breaks."""

    def __init__(
        self, open_session: Callable[[], SyncSession], ack_timeout_s: float = 30.0
    ) -> None:
        self._open = open_session
        self._timeout = ack_timeout_s
        self._lock = threading.Lock()
        self._session: SyncSession | None = None

    def _current(self) -> SyncSession:
        with self._lock:
            if self._session is None or self._session.finished:
                self._session = self._open()
            return self._session

    def _drop(self, session: SyncSession) -> None:
        with self._lock:
            if self._session is session:
                self._session = None
        session.close()

    def process(self, tasks: Sequence[Task]) -> BatchOutcome:
        parts = split_batch(tasks)
        session = self._current()
        try:
            future = session.submit(
                watches=parts.watches, signals=parts.signals, force_complete=parts.force_complete
            )
            ack = future.result(self._timeout)
        except PurgatoryError as exc:
            self._drop(session)
            return outcome_of_error(exc)
        except FutureTimeout:
            self._drop(session)
            return outcome_of_error(
                DeadlineExceededError(grpc.StatusCode.DEADLINE_EXCEEDED, "no acknowledgement")
            )
        return outcome_of_ack(parts, ack)

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()


class BatchingDispatcher:
    """Eureka's batching task dispatcher, sending through ``transport`` (blocking API).

    ``on_permanent_error(holders, error)`` hears of every batch dropped for a permanent
    error (its tasks' futures fail with ``error`` too).
    """

    def __init__(
        self,
        transport: BatchTransport,
        config: DispatcherConfig | None = None,
        *,
        clock: Callable[[], float] = monotonic_ms,
        on_permanent_error: Callable[[Sequence[TaskHolder], PurgatoryError], None] | None = None,
        start: bool = True,
    ) -> None:
        self.config = config or DispatcherConfig()
        self._transport = transport
        self._core = AcceptorCore(self.config, clock, on_permanent_error)
        self._cond = threading.Condition()
        self._in_flight = 0
        self._shutdown = False
        self._ids = itertools.count()
        self._pool: ThreadPoolExecutor | None = None
        self._acceptor: threading.Thread | None = None
        if start:
            self._pool = ThreadPoolExecutor(self.config.max_in_flight, "purgatory-dispatch")
            self._acceptor = threading.Thread(
                target=self._run, name="purgatory-acceptor", daemon=True
            )
            self._acceptor.start()

    def __enter__(self) -> BatchingDispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def counters(self) -> DispatcherCounters:
        """A snapshot of the counters and gauges (any thread)."""
        with self._cond:
            core = self._core
            return replace(core.counters, pending=core.pending_count(), in_flight=self._in_flight)

    # ------------------------------------------------------------------ producers
    def process(self, task_id: Hashable, task: Task, expiry_time: float = math.inf) -> Future[Any]:
        """Eureka's ``process(id, task, expiryTime)``; ``expiry_time`` on the clock (ms)."""
        future: Future[Any] = Future()
        with self._cond:
            if self._shutdown:
                raise RuntimeError("dispatcher is shut down")
            self._core.process(task_id, task, expiry_time, future)
            self._cond.notify_all()
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
    ) -> Future[int]:
        """Queue a signal; resolves with how many operations it completed. Signals with
        the same ``task_id`` coalesce (the newest queued one is sent); by default each
        signal is its own task."""
        tid = ("signal", next(self._ids)) if task_id is None else task_id
        return self.process(tid, SignalTask(key, signal), self._expiry(ttl_ms))

    def watch(
        self, spec: OperationSpec, *, task_id: Hashable | None = None, ttl_ms: float | None = None
    ) -> Future[OperationStatus]:
        """Queue a registration (task id: the operation id, when it has one)."""
        tid = task_id if task_id is not None else (spec.operation_id or ("watch", next(self._ids)))
        return self.process(tid, WatchTask(spec), self._expiry(ttl_ms))

    def force_complete(self, operation_id: str, *, ttl_ms: float | None = None) -> Future[bool]:
        return self.process(
            ("force", operation_id), ForceCompleteTask(operation_id), self._expiry(ttl_ms)
        )

    # ------------------------------------------------------------------ driving
    def run_once(self) -> bool:
        """Send one batch on this thread if one is due (deterministic tests); True if sent."""
        with self._cond:
            batch = self._core.assign_batch_work()
        if batch is None:
            return False
        self._send(batch)
        return True

    def _send(self, batch: list[TaskHolder]) -> None:
        try:
            outcome = self._transport.process([h.task for h in batch])
        except Exception as exc:  # noqa: BLE001 - a transport bug must fail its batch, not hang it
            error = ServerError(grpc.StatusCode.INTERNAL, f"transport failed: {exc!r}")
            outcome = BatchOutcome(ProcessingResult.PERMANENT_ERROR, error=error)
        with self._cond:
            self._core.complete(batch, outcome)
            self._cond.notify_all()

    def _run(self) -> None:
        assert self._pool is not None
        cond = self._cond
        core = self._core
        with cond:
            while not self._shutdown:
                if self._in_flight < self.config.max_in_flight:
                    batch = core.assign_batch_work()
                    if batch is not None:
                        self._in_flight += 1
                        self._pool.submit(self._worker, batch)
                        continue
                    wait = core.wait_time()
                else:
                    wait = None
                cond.wait(None if wait is None else max(wait, 0.5) / 1000.0)

    def _worker(self, batch: list[TaskHolder]) -> None:
        try:
            self._send(batch)
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every accepted task has been sent and answered; False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._in_flight and not self._core.pending_count(), timeout_s
            )

    def shutdown(self, *, flush_timeout_s: float | None = 10.0) -> None:
        """Send what is queued (up to ``flush_timeout_s``), then stop and close."""
        if self._acceptor is not None and not self._shutdown:
            self.flush(flush_timeout_s)
        with self._cond:
            self._shutdown = True
            self._core.drop_all(
                UnavailableError(grpc.StatusCode.UNAVAILABLE, "dispatcher shut down")
            )
            self._cond.notify_all()
        if self._acceptor is not None:
            self._acceptor.join(10.0)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._transport.close()
