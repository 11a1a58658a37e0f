"""The Python clients (async and sync) for Cancel, Reschedule, due_time_ms and
Subscribe heartbeats, against real servers (in memory, and durable across a restart)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    FailedPreconditionError,
    InvalidArgumentError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
    ResumePolicy,
    UnavailableError,
)
from purgatory_server._service import create_server

from tests.delayed.helpers import LONG, config_for
from tests.durability.helpers import NAME
from tests.service.helpers import ServerThread


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.parametrize("kind", ["memory", "durable"])
async def test_async_client_heartbeats_report_the_caught_up_sequence(
    kind: str, tmp_path: Path
) -> None:
    config = config_for(kind, tmp_path)
    server, port = await create_server("127.0.0.1:0", config)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            await c.try_complete_else_watch(["k"], LONG, operation_id="a")
            await c.cancel(["a"])
            stream = c.subscribe(keys=["other"], heartbeat_interval_ms=100, dead_after_s=2.0)
            first = await anext(stream)
            assert first.heartbeat and first.caught_up_sequence == 1
            # An outcome the filter drops still moves the caught-up point.
            await c.try_complete_else_watch(["k"], LONG, operation_id="b")
            await c.force_complete("b")
            beat = await anext(stream)
            while beat.caught_up_sequence < 2:
                beat = await anext(stream)
            assert beat.heartbeat and beat.caught_up_sequence == 2
            await c.try_complete_else_watch(["other"], LONG, operation_id="c")
            await c.cancel(key="other")
            event = await anext(stream)
            while event.heartbeat:
                event = await anext(stream)
            assert (event.operation_id, event.state, event.sequence) == (
                "c",
                OperationState.CANCELLED,
                3,
            )
            await stream.aclose()
            with pytest.raises(InvalidArgumentError, match="heartbeat_interval_ms"):
                await anext(c.subscribe(heartbeat_interval_ms=50))
            with pytest.raises(InvalidArgumentError, match="dead_after_s"):
                await anext(c.subscribe(dead_after_s=1.0))
    finally:
        await server.stop(0.5)
    if kind == "durable":
        server, port = await create_server("127.0.0.1:0", config)
        try:
            async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME) as c:
                stream = c.subscribe(heartbeat_interval_ms=100)
                beat = await anext(stream)
                assert beat.heartbeat and beat.caught_up_sequence == 3
                await stream.aclose()
        finally:
            await server.stop(0.5)


async def test_async_client_treats_a_silent_stream_as_dead(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    try:
        policy = ResumePolicy(attempts=2, initial_delay_s=0.01)
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, resume=policy) as c:
            # Heartbeats every 60 s but a 0.3 s deadline: silence, so dead; resumed twice.
            stream = c.subscribe(heartbeat_interval_ms=60_000, dead_after_s=0.3)
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="treated as dead"):
                await anext(stream)
            assert 0.8 < time.monotonic() - started < 10
    finally:
        await server.stop(0.5)


async def test_async_client_cancel_reschedule_and_due_time(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME) as c:
            due = _now_ms() + 3_600_000
            status = await c.try_complete_else_watch(["k"], 0, operation_id="o", due_time_ms=due)
            assert status.due_time_ms == due
            moved = await c.reschedule("o", timeout_ms=LONG)
            assert moved.state is OperationState.WATCHING and moved.due_time_ms < due
            ended = await c.cancel(prefix="o")
            assert [s.operation_id for s in ended] == ["o"]
            assert ended[0].state is OperationState.CANCELLED
            assert await c.cancel(["o"]) == []
            with pytest.raises(FailedPreconditionError, match="ended"):
                await c.reschedule("o", due_time_ms=due)
            with pytest.raises(InvalidArgumentError, match="target"):
                await c.cancel(["o"], key="k")
            with pytest.raises(InvalidArgumentError, match="deadline"):
                await c.reschedule("o")
    finally:
        await server.stop(0.5)


def test_sync_client_cancel_reschedule_heartbeats_and_dead_stream(tmp_path: Path) -> None:
    with ServerThread(config_for("memory", tmp_path)) as st:
        policy = ResumePolicy(attempts=1, initial_delay_s=0.01)
        with PurgatoryClient(st.target, purgatory=NAME, timeout=10, resume=policy) as c:
            c.try_complete_else_watch(["k"], LONG, operation_id="s1")
            c.try_complete_else_watch(["k"], LONG, operation_id="s2")
            assert c.reschedule("s1", due_time_ms=_now_ms() + LONG).state is (
                OperationState.WATCHING
            )
            assert sorted(s.operation_id for s in c.cancel(key="k")) == ["s1", "s2"]
            with pytest.raises(FailedPreconditionError):
                c.reschedule("s1", timeout_ms=1000)
            stream = c.subscribe(heartbeat_interval_ms=100, dead_after_s=5.0)
            beat = next(stream)
            assert beat.heartbeat and beat.caught_up_sequence == 2
            stream.close()
            silent = c.subscribe(heartbeat_interval_ms=60_000, dead_after_s=0.3)
            with pytest.raises(UnavailableError, match="treated as dead"):
                next(silent)


async def test_session_watch_with_a_due_time(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            due = _now_ms() + 300
            async with c.session() as session:
                spec = OperationSpec(keys=("k",), timeout_ms=0, operation_id="s", due_time_ms=due)
                ack = await session.send(watches=[spec])
                assert ack.error is None
                assert ack.operations[0].due_time_ms == due
                events = session.outcomes()
                event = await asyncio.wait_for(anext(events), 5.0)
                assert (event.operation_id, event.state) == ("s", OperationState.EXPIRED)
                assert event.complete_time_ms >= due - 20
                far = OperationSpec(keys=("k",), timeout_ms=0, due_time_ms=due + 400 * 86_400_000)
                ack = await session.send(watches=[far])
                assert ack.error is not None and "watches[0].due_time_ms" in str(ack.error)
    finally:
        await server.stop(0.5)
