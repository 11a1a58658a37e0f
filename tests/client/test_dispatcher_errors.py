"""The batching dispatcher against a real server: a request that can never fit is a
permanent error (its futures resolve, nothing is retried for ever), and one invalid task
fails only itself, not the batch it was sent in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from purgatory_client import (
    AsyncPurgatoryClient,
    DispatcherConfig,
    InvalidArgumentError,
    OperationSpec,
    OperationState,
    ResourceExhaustedError,
)
from purgatory_client.metrics import instrument_dispatcher
from purgatory_server._service import Limits, ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.service.helpers import TEST_DATA_DIR

CONFIG = ServerConfig(
    listen="127.0.0.1:0",
    data_dir=TEST_DATA_DIR,  # never the checkout's ./data
    grace_s=0.5,
    limits=Limits(max_key_length=64),
    purgatories=(
        PurgatorySettings(name="tiny", max_pending=1),
        PurgatorySettings(name="roomy", max_pending=100),
    ),
)
# Batches form at once and a congestion retry would come back within the test's bound.
FAST = DispatcherConfig(max_batching_delay_ms=50, congestion_retry_delay_ms=20)


@pytest.fixture
async def target() -> AsyncIterator[str]:
    server, port = await create_server("127.0.0.1:0", CONFIG)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0.5)


def spec(op_id: str, key: str = "k") -> OperationSpec:
    return OperationSpec((key,), 60_000, operation_id=op_id)


async def test_a_batch_larger_than_max_pending_is_invalid_not_exhausted(target: str) -> None:
    async with AsyncPurgatoryClient(target, purgatory="tiny", timeout=10) as client:
        # Whatever the load, two new operations never fit max_pending 1: not a capacity
        # problem that frees up, so not RESOURCE_EXHAUSTED.
        with pytest.raises(InvalidArgumentError, match="max_pending is 1"):
            await client.batch_try_complete_else_watch([spec("a"), spec("b")])
        # Capacity that frees up stays RESOURCE_EXHAUSTED: one fits, the next waits.
        await client.try_complete_else_watch(["k"], 60_000, operation_id="one")
        with pytest.raises(ResourceExhaustedError):
            await client.try_complete_else_watch(["k"], 60_000, operation_id="two")


async def test_dispatcher_resolves_a_batch_that_can_never_fit(target: str) -> None:
    async with AsyncPurgatoryClient(target, purgatory="tiny", timeout=10) as client:
        dispatcher = client.dispatcher(FAST)
        try:
            futures = [dispatcher.watch(spec(f"w{i}")) for i in range(10)]
            done, _ = await asyncio.wait(futures, timeout=5)
            assert len(done) == 10, "futures never resolved: retried for ever"
            for future in futures:
                assert isinstance(future.exception(), InvalidArgumentError)
            counters = dispatcher.counters
            assert counters.retried == 0 and counters.failed == 10
        finally:
            await dispatcher.shutdown(flush_timeout_s=1)


async def test_one_invalid_task_fails_only_itself(target: str) -> None:
    async with AsyncPurgatoryClient(target, purgatory="roomy", timeout=10) as client:
        dispatcher = client.dispatcher(FAST)
        try:
            good = [dispatcher.watch(spec(f"g{i}")) for i in range(3)]
            bad = dispatcher.watch(spec("bad", key="x" * 300))
            good += [dispatcher.watch(spec(f"g{i}")) for i in range(3, 6)]
            signal = dispatcher.signal("k")
            await asyncio.wait([*good, bad, signal], timeout=5)
            with pytest.raises(InvalidArgumentError, match="key"):
                bad.result()
            statuses = [f.result() for f in good]
            assert [s.operation_id for s in statuses] == [f"g{i}" for i in range(6)]
            assert all(s.created for s in statuses)
            assert signal.result() == 6  # the good watches were registered, then signalled
            assert (await client.get_operation("g5")).state is OperationState.COMPLETED
            counters = dispatcher.counters
            assert (counters.failed, counters.succeeded) == (1, 7)
            assert (counters.rejected, counters.resent) == (1, 7)
            assert (counters.pending, counters.in_flight) == (0, 0)
        finally:
            await dispatcher.shutdown(flush_timeout_s=1)


async def test_dispatcher_counters_are_exported_as_metrics(target: str) -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    async with AsyncPurgatoryClient(target, purgatory="roomy", timeout=10) as client:
        dispatcher = client.dispatcher(FAST)
        instrument_dispatcher(dispatcher, meter, attributes={"purgatory.name": "roomy"})
        try:
            futures = [dispatcher.watch(spec(f"m{i}")) for i in range(4)]
            futures.append(dispatcher.watch(spec("m-bad", key="y" * 300)))
            await asyncio.wait(futures, timeout=5)
            points = _points(reader)
        finally:
            await dispatcher.shutdown(flush_timeout_s=1)
    tasks = {
        a["purgatory.dispatcher.event"]: v
        for a, v in points["purgatory.client.dispatcher.tasks"]
        if a["purgatory.name"] == "roomy"
    }
    assert tasks == {
        "accepted": 5,
        "overridden": 0,
        "expired": 0,
        "overflowed": 0,
        "retried": 0,
        "succeeded": 4,
        "failed": 1,
        "rejected": 1,
        "resent": 4,
    }
    assert [v for _, v in points["purgatory.client.dispatcher.batches"]] == [2]
    assert [v for _, v in points["purgatory.client.dispatcher.pending"]] == [0]
    assert [v for _, v in points["purgatory.client.dispatcher.in_flight"]] == [0]


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], int]]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: [(dict(p.attributes or {}), int(p.value)) for p in metric.data.data_points]  # type: ignore[union-attr]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
