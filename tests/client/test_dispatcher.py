"""The batching dispatcher's Eureka semantics, deterministic: an injected clock, a fake
transport, and ``run_once`` instead of threads (no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import grpc
import pytest
from purgatory_client import (
    AsyncBatchingDispatcher,
    BatchingDispatcher,
    DispatcherConfig,
    InvalidArgumentError,
    ProcessingResult,
    SignalTask,
    TaskExpiredError,
    TaskOverflowError,
    UnavailableError,
)
from purgatory_client._batcher import MAX_DELAY_MS, BatchOutcome, TrafficShaper, classify
from purgatory_client.errors import ResourceExhaustedError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeTransport:
    """Records every batch; answers with the next scripted result (default SUCCESS)."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []
        self.script: list[ProcessingResult] = []

    def _answer(self, tasks: Sequence[Any]) -> BatchOutcome:
        self.batches.append(list(tasks))
        result = self.script.pop(0) if self.script else ProcessingResult.SUCCESS
        if result is ProcessingResult.SUCCESS:
            return BatchOutcome(result, [f"done:{t.key}" for t in tasks])
        code = {
            ProcessingResult.CONGESTION: grpc.StatusCode.RESOURCE_EXHAUSTED,
            ProcessingResult.TRANSIENT_ERROR: grpc.StatusCode.UNAVAILABLE,
            ProcessingResult.PERMANENT_ERROR: grpc.StatusCode.INVALID_ARGUMENT,
        }[result]
        errors = {
            grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
            grpc.StatusCode.UNAVAILABLE: UnavailableError,
            grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
        }
        return BatchOutcome(result, error=errors[code](code, "scripted"))

    def process(self, tasks: Sequence[Any]) -> BatchOutcome:
        return self._answer(tasks)

    def close(self) -> None:
        pass

    def keys(self, batch: int) -> list[str]:
        return [t.key for t in self.batches[batch]]


def make(**config: Any) -> tuple[BatchingDispatcher, FakeTransport, Clock, list[Any]]:
    clock, transport, permanent = Clock(), FakeTransport(), []
    cfg = DispatcherConfig(**{"max_batching_delay_ms": 5.0, "max_batch_size": 10, **config})
    dispatcher = BatchingDispatcher(
        transport,
        cfg,
        clock=clock,
        start=False,
        on_permanent_error=lambda holders, err: permanent.append(
            ([h.task_id for h in holders], err)
        ),
    )
    return dispatcher, transport, clock, permanent


def test_a_newer_task_with_the_same_id_replaces_the_queued_one_and_is_sent_once() -> None:
    d, transport, clock, _ = make()
    first = d.signal("old", task_id="partition-0")
    other = d.signal("x")
    second = d.signal("newer", task_id="partition-0")
    third = d.signal("newest", task_id="partition-0")
    clock.now = 5
    assert d.run_once()
    # Sent once, in the place of the first, with the newest task.
    assert transport.keys(0) == ["newest", "x"]
    assert [f.result(0) for f in (first, second, third)] == ["done:newest"] * 3
    assert other.result(0) == "done:x"
    c = d.counters
    assert (c.accepted, c.overridden, c.succeeded, c.batches) == (4, 2, 2, 1)


def test_overflow_drops_the_oldest_and_counts_it() -> None:
    d, transport, _, _ = make(max_buffer_size=3)
    futures = [d.signal(f"k{i}") for i in range(5)]
    assert d.run_once()  # a full buffer need not wait for the batching delay
    assert transport.keys(0) == ["k2", "k3", "k4"]
    for f in futures[:2]:
        with pytest.raises(TaskOverflowError):
            f.result(0)
    assert d.counters.overflowed == 2


def test_expired_tasks_are_dropped_never_sent() -> None:
    d, transport, clock, _ = make()
    short = d.signal("short", ttl_ms=3)
    long = d.signal("long", ttl_ms=100)
    clock.now = 5
    assert d.run_once()
    assert transport.keys(0) == ["long"]
    with pytest.raises(TaskExpiredError):
        short.result(0)
    assert long.result(0) == "done:long"
    assert d.counters.expired == 1


def test_max_batching_delay_and_max_batch_size() -> None:
    d, transport, clock, _ = make(max_batch_size=3, max_batching_delay_ms=5)
    d.signal("a")
    clock.now = 4
    assert not d.run_once()  # the oldest has waited 4 ms of 5
    clock.now = 5
    assert d.run_once()
    for k in "bcdefgh":
        d.signal(k)
    assert d.run_once() and d.run_once()  # full batches go at once
    assert not d.run_once()  # one left: it waits for the delay
    clock.now = 10
    assert d.run_once()
    assert [len(b) for b in transport.batches] == [1, 3, 3, 1]


def test_an_overridden_task_keeps_its_place_and_its_age() -> None:
    """max_batching_delay bounds a task's wait even while newer tasks with its id keep
    replacing it (each replacement used to restart the clock)."""
    d, transport, clock, _ = make(max_batching_delay_ms=5)
    first = d.signal("v1", task_id="offset")
    assert not d.run_once()  # t=0: queued, not due
    for t, value in ((2, "v2"), (4, "v3")):
        clock.now = t
        d.signal(value, task_id="offset")
        assert not d.run_once()
    clock.now = 5  # 5 ms since the first submission, 1 ms since the last replacement
    assert d.run_once()
    assert transport.keys(0) == ["v3"]
    assert first.result(0) == "done:v3"


@pytest.mark.parametrize(
    ("failure", "delay_field", "delay"),
    [
        (ProcessingResult.TRANSIENT_ERROR, "network_failure_retry_ms", 20.0),
        (ProcessingResult.CONGESTION, "congestion_retry_delay_ms", 100.0),
    ],
)
def test_failed_batches_retry_first_after_the_traffic_shapers_delay(
    failure: ProcessingResult, delay_field: str, delay: float
) -> None:
    d, transport, clock, _ = make(**{delay_field: delay})
    futures = [d.signal(k) for k in "abc"]
    transport.script = [failure]
    clock.now = 5
    assert d.run_once()
    d.signal("d")  # accepted after the failure: goes after the retries
    clock.now = 5 + delay - 1
    assert not d.run_once()  # the shaper still holds the next batch
    clock.now = 5 + delay
    assert d.run_once()
    assert transport.keys(1) == ["a", "b", "c", "d"]
    assert [f.result(0) for f in futures] == ["done:a", "done:b", "done:c"]
    c = d.counters
    assert (c.retried, c.succeeded, c.failed) == (3, 4, 0)


def test_a_retry_overridden_by_a_newer_task_is_not_sent() -> None:
    d, transport, clock, _ = make()
    old = d.signal("v1", task_id="p")
    transport.script = [ProcessingResult.TRANSIENT_ERROR]
    clock.now = 5
    assert d.run_once()
    new = d.signal("v2", task_id="p")
    clock.now = 1000
    assert d.run_once()
    assert transport.keys(1) == ["v2"]
    assert old.result(0) == new.result(0) == "done:v2"
    assert d.counters.overridden == 1


def test_permanent_errors_drop_the_batch_and_tell_the_callback() -> None:
    d, transport, clock, permanent = make()
    futures = [d.signal(k, task_id=k) for k in "ab"]
    transport.script = [ProcessingResult.PERMANENT_ERROR]
    clock.now = 5
    assert d.run_once()
    for f in futures:
        with pytest.raises(InvalidArgumentError):
            f.result(0)
    assert [ids for ids, _ in permanent] == [["a", "b"]]
    clock.now = 10_000
    assert not d.run_once()  # not retried
    assert (d.counters.failed, d.counters.retried) == (2, 0)


def test_shutdown_fails_what_was_never_sent() -> None:
    d, _, _, _ = make()
    future: Future[int] = d.signal("late")
    d.shutdown()
    with pytest.raises(UnavailableError):
        future.result(0)


def test_status_codes_map_to_eurekas_outcomes() -> None:
    assert classify(grpc.StatusCode.OK) is ProcessingResult.SUCCESS
    assert classify(grpc.StatusCode.RESOURCE_EXHAUSTED) is ProcessingResult.CONGESTION
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        assert classify(code) is ProcessingResult.TRANSIENT_ERROR
    for code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND):
        assert classify(code) is ProcessingResult.PERMANENT_ERROR


def test_traffic_shaper_caps_both_delays_and_congestion_wins() -> None:
    shaper = TrafficShaper(10 * MAX_DELAY_MS, 10 * MAX_DELAY_MS)
    assert shaper.congestion_retry_delay_ms == shaper.network_failure_retry_ms == MAX_DELAY_MS
    shaper = TrafficShaper(100, 30)
    shaper.register_failure(ProcessingResult.TRANSIENT_ERROR, 0)
    shaper.register_failure(ProcessingResult.CONGESTION, 0)
    assert shaper.transmission_delay(10) == 90
    assert shaper.transmission_delay(100) == 0  # both windows over


class AsyncFakeTransport(FakeTransport):
    async def process(self, tasks: Sequence[Any]) -> BatchOutcome:  # type: ignore[override]
        return self._answer(tasks)

    async def close(self) -> None:  # type: ignore[override]
        pass


async def test_async_dispatcher_same_rules() -> None:
    clock, transport = Clock(), AsyncFakeTransport()
    cfg = DispatcherConfig(max_batching_delay_ms=5, network_failure_retry_ms=20)
    d = AsyncBatchingDispatcher(transport, cfg, clock=clock, start=False)
    a1 = d.signal("a1", task_id="a")
    a2 = d.signal("a2", task_id="a")
    b = d.signal("b")
    transport.script = [ProcessingResult.TRANSIENT_ERROR]
    clock.now = 5
    assert await d.run_once()
    clock.now = 24
    assert not await d.run_once()
    clock.now = 25
    assert await d.run_once()
    assert transport.keys(0) == transport.keys(1) == ["a2", "b"]
    assert await a1 == await a2 == "done:a2"
    assert await b == "done:b"
    assert (d.counters.overridden, d.counters.retried) == (1, 2)
    await d.shutdown()
    assert isinstance(SignalTask("k"), SignalTask)
    assert asyncio.isfuture(a1)
