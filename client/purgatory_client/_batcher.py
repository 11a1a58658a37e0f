"""Eureka's task batcher (``com.netflix.eureka.util.batcher``), without I/O or threads.

:class:`AcceptorCore` is Eureka's ``AcceptorExecutor`` as a state machine that the sync
and asyncio dispatchers drive (and tests drive by hand, with an injected clock):

- ``process(id, task, expiry)`` appends a :class:`TaskHolder` to the **acceptor queue**;
- failed batches go back to the **reprocess queue** (:meth:`AcceptorCore.reprocess`);
- :meth:`AcceptorCore.drain_input_queues` moves both into the **pending map** (id ->
  holder) and the **processing order** (ids). Retried tasks go to the *front*, newest
  first, and are dropped (counted *overridden*) if a newer task with the same id is
  already pending; an accepted task with the id of a pending one replaces it in place and
  is sent once (*overridden*). When the pending map holds ``max_buffer_size`` tasks the
  oldest is dropped to make room (*overflowed*), and retries that no longer fit are
  dropped;
- :meth:`AcceptorCore.assign_batch_work` takes up to ``max_batch_size`` tasks once the
  oldest has waited ``max_batching_delay_ms``, the buffer is full, or a full batch is
  ready (the last is not in Eureka, which only waits; a full batch has nothing to gain
  from waiting). Expired tasks are dropped there (*expired*), never sent;
- the :class:`TrafficShaper` delays the next batch after a congestion or a network
  failure by the matching retry delay (capped at :data:`MAX_DELAY_MS`), as Eureka does.

Outcomes map from status codes (:func:`classify`): OK -> SUCCESS, RESOURCE_EXHAUSTED ->
CONGESTION, UNAVAILABLE and DEADLINE_EXCEEDED -> TRANSIENT_ERROR (both retried), anything
else -> PERMANENT_ERROR (dropped, the tasks' futures fail and ``on_permanent_error`` is
told). The server answers RESOURCE_EXHAUSTED only for capacity that frees up; a request
that can never fit (more new operations than ``max_pending``) is INVALID_ARGUMENT, so it
fails instead of being retried for ever. A permanent error that names one task of the
batch (``BatchOutcome.culprit``) fails only that task (*rejected*); the others go back to
the front of the processing order at once (*resent*: the server changed nothing).

Every task has a future (anything with ``set_result``/``set_exception``/``done``); a task
overridden by a newer one with the same id resolves with the newer one's result.

Thread safety: none. The dispatchers call every method under one lock (sync) or on the
event loop (asyncio).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from purgatory_client.errors import PurgatoryError

__all__ = [
    "MAX_DELAY_MS",
    "AcceptorCore",
    "BatchOutcome",
    "DispatcherConfig",
    "DispatcherCounters",
    "ProcessingResult",
    "TaskExpiredError",
    "TaskHolder",
    "TaskOverflowError",
    "TrafficShaper",
    "classify",
]

# Eureka's TrafficShaper caps both retry delays at 30 s.
MAX_DELAY_MS = 30_000.0


class ProcessingResult(enum.Enum):
    SUCCESS = "success"
    CONGESTION = "congestion"
    TRANSIENT_ERROR = "transient_error"
    PERMANENT_ERROR = "permanent_error"


def classify(code: grpc.StatusCode) -> ProcessingResult:
    """Eureka's outcome for a batch that ended with status ``code``."""
    if code is grpc.StatusCode.OK:
        return ProcessingResult.SUCCESS
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ProcessingResult.CONGESTION
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return ProcessingResult.TRANSIENT_ERROR
    return ProcessingResult.PERMANENT_ERROR


class TaskExpiredError(PurgatoryError):
    """The task's expiry passed before it could be sent; it was never sent."""

    def __init__(self, task_id: Hashable) -> None:
        super().__init__(grpc.StatusCode.DEADLINE_EXCEEDED, f"task {task_id!r} expired unsent")


class TaskOverflowError(PurgatoryError):
    """The dispatcher's buffer was full; the task was dropped unsent (oldest first)."""

    def __init__(self, task_id: Hashable, max_buffer_size: int) -> None:
        super().__init__(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"task {task_id!r} dropped: more than max_buffer_size={max_buffer_size} pending",
        )


class TaskFuture(Protocol):
    def done(self) -> bool: ...
    def set_result(self, result: Any, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


@dataclass(frozen=True)
class DispatcherConfig:
    """Eureka's ``createBatchingTaskDispatcher`` arguments (times in milliseconds)."""

    max_buffer_size: int = 100_000
    max_batch_size: int = 500
    max_batching_delay_ms: float = 5.0
    congestion_retry_delay_ms: float = 1_000.0
    network_failure_retry_ms: float = 100.0
    # Eureka's workerCount: batches in flight at once.
    max_in_flight: int = 4

    def __post_init__(self) -> None:
        for name in ("max_buffer_size", "max_batch_size", "max_in_flight"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


@dataclass
class DispatcherCounters:
    """Eureka's acceptor and executor counters (tasks, not batches; ``batches`` counts
    batches sent), since the dispatcher started. ``pending`` and ``in_flight`` are gauges
    filled in by a dispatcher's ``counters`` snapshot: tasks accepted and not yet sent,
    and batches sent and not yet answered. Exported as OpenTelemetry metrics by
    :func:`purgatory_client.metrics.instrument_dispatcher`."""

    accepted: int = 0
    overridden: int = 0
    expired: int = 0
    overflowed: int = 0
    retried: int = 0
    succeeded: int = 0
    failed: int = 0
    batches: int = 0
    # Failed alone by a permanent error naming them (included in ``failed``), and the
    # tasks of their batches sent again without them.
    rejected: int = 0
    resent: int = 0
    pending: int = 0
    in_flight: int = 0


@dataclass(eq=False, slots=True)
class TaskHolder:
    task_id: Hashable
    task: Any
    expiry_time: float  # clock ms; math.inf for never
    submit_timestamp: float
    future: TaskFuture
    # Futures of tasks this one overrode: they resolve with it.
    followers: list[TaskFuture] = field(default_factory=list)

    def succeed(self, value: Any) -> None:
        for future in (self.future, *self.followers):
            if not future.done():
                future.set_result(value)

    def fail(self, error: BaseException) -> None:
        for future in (self.future, *self.followers):
            if not future.done():
                future.set_exception(error)


@dataclass(frozen=True)
class BatchOutcome:
    """What a transport made of one batch: one value per task on SUCCESS, else the error."""

    result: ProcessingResult
    values: Sequence[Any] = ()
    error: PurgatoryError | None = None
    # PERMANENT_ERROR only: the position of the one task the error is about (the rest
    # of the batch was not applied and may be sent again), or None: the whole batch.
    culprit: int | None = None


class TrafficShaper:
    """Delays the next batch after congestion or a network failure (Eureka's rules)."""

    def __init__(self, congestion_retry_delay_ms: float, network_failure_retry_ms: float) -> None:
        self.congestion_retry_delay_ms = min(MAX_DELAY_MS, congestion_retry_delay_ms)
        self.network_failure_retry_ms = min(MAX_DELAY_MS, network_failure_retry_ms)
        self._last_congestion: float | None = None
        self._last_network_failure: float | None = None

    def register_failure(self, result: ProcessingResult, now: float) -> None:
        if result is ProcessingResult.CONGESTION:
            self._last_congestion = now
        elif result is ProcessingResult.TRANSIENT_ERROR:
            self._last_network_failure = now

    def transmission_delay(self, now: float) -> float:
        """Milliseconds the next batch must still wait (0: send now)."""
        if self._last_congestion is not None:
            elapsed = now - self._last_congestion
            if 0 <= elapsed < self.congestion_retry_delay_ms:
                return self.congestion_retry_delay_ms - elapsed
            self._last_congestion = None
        if self._last_network_failure is not None:
            elapsed = now - self._last_network_failure
            if 0 <= elapsed < self.network_failure_retry_ms:
                return self.network_failure_retry_ms - elapsed
            self._last_network_failure = None
        return 0.0


class AcceptorCore:
    """Eureka's AcceptorExecutor state (see the module docstring); not thread-safe."""

    def __init__(
        self,
        config: DispatcherConfig,
        clock: Callable[[], float],
        on_permanent_error: Callable[[Sequence[TaskHolder], PurgatoryError], None] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.counters = DispatcherCounters()
        self.traffic_shaper = TrafficShaper(
            config.congestion_retry_delay_ms, config.network_failure_retry_ms
        )
        self.acceptor_queue: deque[TaskHolder] = deque()
        self.reprocess_queue: deque[TaskHolder] = deque()
        self.pending_tasks: dict[Hashable, TaskHolder] = {}
        self.processing_order: deque[Hashable] = deque()
        self._schedule_time = 0.0
        self._on_permanent_error = on_permanent_error

    # ------------------------------------------------------------------ input
    def process(self, task_id: Hashable, task: Any, expiry_time: float, future: TaskFuture) -> None:
        """Accept a task (Eureka's ``TaskDispatcher.process``)."""
        self.acceptor_queue.append(TaskHolder(task_id, task, expiry_time, self.clock(), future))
        self.counters.accepted += 1

    def reprocess(self, holders: Sequence[TaskHolder], result: ProcessingResult) -> None:
        """A batch failed with CONGESTION or TRANSIENT_ERROR: retry its tasks first."""
        self.reprocess_queue.extend(holders)
        self.counters.retried += len(holders)
        self.traffic_shaper.register_failure(result, self.clock())

    def _is_full(self) -> bool:
        return len(self.pending_tasks) >= self.config.max_buffer_size

    def drain_input_queues(self) -> None:
        self._drain_reprocess_queue()
        while self.acceptor_queue:
            self._append_task_holder(self.acceptor_queue.popleft())

    def _drain_reprocess_queue(self) -> None:
        now = self.clock()
        queue = self.reprocess_queue
        pending = self.pending_tasks
        while queue and not self._is_full():
            holder = queue.pop()  # newest first, each to the front: the order is kept
            if holder.expiry_time <= now:
                self.counters.expired += 1
                holder.fail(TaskExpiredError(holder.task_id))
            elif holder.task_id in pending:
                self.counters.overridden += 1
                pending[holder.task_id].followers.extend((holder.future, *holder.followers))
            else:
                pending[holder.task_id] = holder
                self.processing_order.appendleft(holder.task_id)
        if queue:  # full: the older retries are dropped
            self.counters.overflowed += len(queue)
            for holder in queue:
                holder.fail(TaskOverflowError(holder.task_id, self.config.max_buffer_size))
            queue.clear()

    def _append_task_holder(self, holder: TaskHolder) -> None:
        pending = self.pending_tasks
        previous = pending.get(holder.task_id)
        if previous is not None:
            self.counters.overridden += 1
            holder.followers.extend((previous.future, *previous.followers))
            # The newer task takes the older one's place *and* its age: max_batching_delay
            # bounds how long a task waits however often it is replaced meanwhile.
            holder.submit_timestamp = previous.submit_timestamp
            pending[holder.task_id] = holder  # keeps its place in the processing order
            return
        if self._is_full():
            oldest = self.processing_order.popleft()
            dropped = pending.pop(oldest)
            self.counters.overflowed += 1
            dropped.fail(TaskOverflowError(dropped.task_id, self.config.max_buffer_size))
        pending[holder.task_id] = holder
        self.processing_order.append(holder.task_id)

    # ------------------------------------------------------------------ scheduling
    def _has_enough_tasks_for_next_batch(self, now: float) -> bool:
        order = self.processing_order
        if not order:
            return False
        if self._is_full() or len(order) >= self.config.max_batch_size:
            return True
        head = self.pending_tasks[order[0]]
        return now - head.submit_timestamp >= self.config.max_batching_delay_ms

    def assign_batch_work(self) -> list[TaskHolder] | None:
        """The next batch to send now, or None (drains the inputs first)."""
        self.drain_input_queues()
        now = self.clock()
        if self._schedule_time < now:
            self._schedule_time = now + self.traffic_shaper.transmission_delay(now)
        if self._schedule_time > now or not self._has_enough_tasks_for_next_batch(now):
            return None
        batch: list[TaskHolder] = []
        order = self.processing_order
        pending = self.pending_tasks
        while len(batch) < self.config.max_batch_size and order:
            holder = pending.pop(order.popleft())
            if holder.expiry_time > now:
                batch.append(holder)
            else:
                self.counters.expired += 1
                holder.fail(TaskExpiredError(holder.task_id))
        if not batch:
            return None
        self.counters.batches += 1
        return batch

    def wait_time(self) -> float | None:
        """Milliseconds until :meth:`assign_batch_work` may have work; None: nothing queued."""
        if self.acceptor_queue or self.reprocess_queue:
            return 0.0
        order = self.processing_order
        if not order:
            return None
        now = self.clock()
        shaped = max(0.0, self._schedule_time - now)
        if self._is_full() or len(order) >= self.config.max_batch_size:
            return shaped
        head = self.pending_tasks[order[0]]
        waited = now - head.submit_timestamp
        return max(shaped, self.config.max_batching_delay_ms - waited)

    # ------------------------------------------------------------------ results
    def complete(self, batch: Sequence[TaskHolder], outcome: BatchOutcome) -> None:
        """Apply a transport's verdict on ``batch`` (Eureka's worker ``switch``)."""
        result = outcome.result
        counters = self.counters
        if result is ProcessingResult.SUCCESS:
            counters.succeeded += len(batch)
            for holder, value in zip(batch, outcome.values, strict=True):
                holder.succeed(value)
        elif result is ProcessingResult.PERMANENT_ERROR:
            error = outcome.error or PurgatoryError(grpc.StatusCode.UNKNOWN, "batch failed")
            blamed = outcome.culprit
            if blamed is not None and len(batch) > 1 and 0 <= blamed < len(batch):
                # One task is at fault and nothing was applied: fail it, resend the rest.
                bad = batch[blamed]
                rest = [h for i, h in enumerate(batch) if i != blamed]
                counters.rejected += 1
                counters.resent += len(rest)
                batch = [bad]
                self.reprocess_queue.extend(rest)  # to the front, no traffic-shaper delay
            counters.failed += len(batch)
            if self._on_permanent_error is not None:
                self._on_permanent_error(batch, error)
            for holder in batch:
                holder.fail(error)
        else:
            self.reprocess(batch, result)

    def pending_count(self) -> int:
        """Tasks accepted and not yet handed to a batch."""
        return len(self.acceptor_queue) + len(self.reprocess_queue) + len(self.pending_tasks)

    def drop_all(self, error: PurgatoryError) -> int:
        """Fail every task not yet sent (shutdown); returns how many."""
        holders = [*self.acceptor_queue, *self.reprocess_queue, *self.pending_tasks.values()]
        self.acceptor_queue.clear()
        self.reprocess_queue.clear()
        self.pending_tasks.clear()
        self.processing_order.clear()
        for holder in holders:
            holder.fail(error)
        return len(holders)
