"""Metrics through the SDK's in-memory reader after real RPCs on a loopback server."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from purgatory_client import AsyncPurgatoryClient, NotFoundError, OperationSpec
from purgatory_server._service import PurgatorySettings, create_server
from purgatory_server._service.observability.readers import InMemoryReader
from purgatory_server._service.observability.setup import Telemetry

from tests.observability.helpers import collect, point, value
from tests.service.helpers import TEST_CONFIG, until

DEFAULT = {"purgatory.name": "default"}


def state(name: str, purgatory: str = "default") -> dict[str, str]:
    return {"purgatory.name": purgatory, "state": name}


def rpc(method: str, code: str = "OK") -> dict[str, str]:
    method = f"purgatory.v1.PurgatoryService/{method}"
    return {"rpc.method": method, "rpc.response.status_code": code}


async def test_counts_histograms_and_gauges_follow_real_rpcs() -> None:
    reader = InMemoryReader()
    server, port = await create_server(
        "127.0.0.1:0", TEST_CONFIG, telemetry=Telemetry(metric_readers=[reader])
    )
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            await _drive(c, reader)
        m = collect(reader)
        _check_counters(m)
        _check_histograms(m)
        _check_rpcs_and_gauges(m)
    finally:
        await server.stop(0.5)


async def _drive(c: AsyncPurgatoryClient, reader: InMemoryReader) -> None:
    """Every kind of outcome, a batch, a second purgatory (deleted), a NOT_FOUND, a
    long-poll; the gauges checked half-way."""
    await c.try_complete_else_watch(["k0"], 60_000, operation_id="done")
    await c.try_complete_else_watch(["k1"], 60_000, operation_id="forced")
    await c.try_complete_else_watch(["k2"], 1500, operation_id="late")
    # An idempotent re-send registers nothing new.
    await c.try_complete_else_watch(["k0"], 60_000, operation_id="done")
    assert await c.check_and_complete("k0") == 1
    await c.force_complete("forced")
    ops = [OperationSpec(keys=[f"b{i}"], timeout_ms=60_000) for i in range(4)]
    await c.batch_try_complete_else_watch(ops)
    result = await c.batch_check_and_complete([f"b{i}" for i in range(4)])
    assert result.completed == 4
    await c.create_purgatory("other")
    await c.try_complete_else_watch(["x"], 60_000, purgatory="other")
    mid = collect(reader)
    assert value(mid, "purgatory.operations.delayed", DEFAULT) == 1  # "late"
    assert value(mid, "purgatory.timer.size", DEFAULT) == 1
    assert value(mid, "purgatory.operations.delayed", {"purgatory.name": "other"}) == 1
    assert await c.delete_purgatory("other") == 1
    with pytest.raises(NotFoundError):
        await c.get_operation("missing")
    # A long-poll that a signal answers.
    poll = asyncio.ensure_future(c.wait(["lp"], 60_000))

    async def watching() -> bool:
        return (await c.get_purgatory("default")).watched_keys >= 2

    await until(watching)
    assert await c.check_and_complete("lp") == 1
    await poll

    async def expired() -> bool:
        return (await c.get_operation("late")).is_final

    await until(expired)
    # Completed-but-unpurged watchers count until a signal (or a purge) drops them.
    await c.check_and_complete("k2")
    await c.check_and_complete("k1")


def _check_counters(m: dict[str, Any]) -> None:
    assert value(m, "purgatory.operations.registered", DEFAULT) == 3 + 4 + 1
    assert value(m, "purgatory.operations.outcomes", state("completed")) == 1 + 4 + 1
    assert value(m, "purgatory.operations.outcomes", state("force_completed")) == 1
    assert value(m, "purgatory.operations.outcomes", state("expired")) == 1
    assert value(m, "purgatory.operations.outcomes", state("cancelled")) == 0
    assert value(m, "purgatory.signals", DEFAULT) == 1 + 4 + 1 + 2
    # The deleted purgatory's series are gone; its cancellation was counted before.
    assert not [p for p in m["purgatory.operations.outcomes"] if "other" in str(p.attributes)]


def _check_histograms(m: dict[str, Any]) -> None:
    lateness = point(m["purgatory.expiry.lateness"], DEFAULT)
    assert lateness.count == 1
    assert 0 <= lateness.sum < 1.0  # fired within a second of due (shared machine)
    assert sum(lateness.bucket_counts) == 1
    assert lateness.explicit_bounds[:4] == [0.0, 0.001, 0.002, 0.003]  # 1 ms resolution
    assert value(m, "purgatory.expiry.early", DEFAULT) in (0, 1)

    waits = m["purgatory.operation.wait.duration"]
    assert point(waits, state("completed")).count == 6
    assert point(waits, state("expired")).count == 1
    # Its timeout, less the one 1 ms tick the wheel may fire early (expiry.early above).
    assert point(waits, state("expired")).min >= 1.5 - 0.001
    assert value(m, "purgatory.longpoll.duration", DEFAULT) == 1
    batches = m["purgatory.batch.size"]
    register = point(batches, {**DEFAULT, "purgatory.batch.kind": "register"})
    assert register.count == 6 and register.max == 4  # 5 single calls + 1 batch of 4
    signal = point(batches, {**DEFAULT, "purgatory.batch.kind": "signal"})
    assert signal.count == 5 and signal.sum == 8


def _check_rpcs_and_gauges(m: dict[str, Any]) -> None:
    durations = m["rpc.server.call.duration"]
    assert point(durations, rpc("TryCompleteElseWatch")).count == 6
    assert point(durations, rpc("GetOperation", "NOT_FOUND")).count == 1
    assert value(m, "purgatory.rpc.rejected", rpc("GetOperation", "NOT_FOUND")) == 1
    rejected_ok = [p for p in m["purgatory.rpc.rejected"] if "OK" in p.attributes.values()]
    assert not rejected_ok

    # Clean-up done: every gauge is back to zero.
    for gauge in (
        "purgatory.operations.delayed",
        "purgatory.keys.watched",
        "purgatory.timer.size",
        "purgatory.subscribers",
    ):
        assert value(m, gauge, DEFAULT) == 0, gauge
    assert value(m, "purgatory.events.retained", DEFAULT) == 8
    # The memory budget: nothing pending holds anything; the 8 outcomes are retained.
    assert value(m, "purgatory.memory.held", DEFAULT) == 0
    assert value(m, "purgatory.memory.retained", DEFAULT) > 8 * 512
    assert value(m, "purgatory.memory.limit", {"pool": "held"}) > 0
    assert "purgatory.journal.size" not in m  # no durable purgatory


async def test_subscriber_lag_and_gauge() -> None:
    reader = InMemoryReader()
    server, port = await create_server(
        "127.0.0.1:0", TEST_CONFIG, telemetry=Telemetry(metric_readers=[reader])
    )
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            for i in range(3):
                await c.try_complete_else_watch([f"s{i}"], 60_000)
                await c.check_and_complete(f"s{i}")
            stream = c.subscribe(after_sequence=0)
            events = [await anext(stream) for _ in range(3)]
            assert [e.sequence for e in events] == [1, 2, 3]
            assert value(collect(reader), "purgatory.subscribers", DEFAULT) == 1
            await stream.aclose()
        lag = point(collect(reader)["purgatory.subscriber.lag"], DEFAULT)
        # The replay of 1..3 was sent as one batch whose first event was 2 behind.
        assert lag.count == 1 and lag.max == 2
    finally:
        await server.stop(0.5)


async def test_durable_journal_fsyncs_and_size(tmp_path: Path) -> None:
    reader = InMemoryReader()
    config = replace(
        TEST_CONFIG,
        data_dir=str(tmp_path),
        fsync="always",
        purgatories=(PurgatorySettings(name="default", durable=True, retained_events=50),),
    )
    server, port = await create_server(
        "127.0.0.1:0", config, telemetry=Telemetry(metric_readers=[reader])
    )
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            for i in range(5):
                await c.try_complete_else_watch([f"d{i}"], 60_000)
                await c.check_and_complete(f"d{i}")
        m: dict[str, Any] = collect(reader)
        fsyncs = point(m["purgatory.journal.fsync.duration"], DEFAULT)
        assert fsyncs.count >= 1 and fsyncs.min >= 0
        groups = point(m["purgatory.journal.fsync.records"], DEFAULT)
        assert groups.count == fsyncs.count
        # Every record written (3 per pair) was made durable by some fsync.
        assert groups.sum >= 15
        assert value(m, "purgatory.journal.size", DEFAULT) > 0
    finally:
        await server.stop(0.5)


async def test_calls_refused_at_the_edge_are_measured_and_traced() -> None:
    """An unauthenticated call never reaches the servicer; it is still counted and traced."""
    import tomllib

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from purgatory_client import UnauthenticatedError
    from purgatory_server._service.config.server_config import from_mapping

    config = from_mapping(
        tomllib.loads(
            '[[auth.tokens]]\nname = "t"\ntoken = "s3cret-t0ken"\npermissions = ["watch"]'
        ),
        TEST_CONFIG,
    )
    reader, spans = InMemoryReader(), InMemorySpanExporter()
    telemetry = Telemetry(metric_readers=[reader], span_processors=[SimpleSpanProcessor(spans)])
    server, port = await create_server("127.0.0.1:0", config, telemetry=telemetry)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            with pytest.raises(UnauthenticatedError):
                await c.get_operation("x")

        # The edge records the refusal as its call ends, which may be after the client
        # has its answer: wait for it rather than read at once.
        async def counted() -> bool:
            return "purgatory.rpc.rejected" in collect(reader) and bool(spans.get_finished_spans())

        await until(counted, 10.0)
        m = collect(reader)
        assert value(m, "purgatory.rpc.rejected", rpc("GetOperation", "UNAUTHENTICATED")) == 1
        (span,) = spans.get_finished_spans()
        assert span.attributes is not None
        assert span.attributes["rpc.response.status_code"] == "UNAUTHENTICATED"
    finally:
        await server.stop(0.5)
