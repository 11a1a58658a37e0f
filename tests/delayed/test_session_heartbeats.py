"""Session heartbeats: the server side on a raw stream, and both clients (heartbeats
surfaced, a silent stream treated as dead). Real time is the point here: bounds are loose."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    InvalidArgumentError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
    UnavailableError,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import create_server

from tests.delayed.helpers import LONG, config_for
from tests.durability.helpers import NAME
from tests.service.helpers import ServerThread


async def _until(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_server_sends_heartbeats_only_when_idle(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    frames: asyncio.Queue[pb.SessionRequest | None] = asyncio.Queue()

    async def requests() -> AsyncIterator[pb.SessionRequest]:
        while (frame := await frames.get()) is not None:
            yield frame

    call = stub.Session(requests(), timeout=20)
    try:
        await frames.put(pb.SessionRequest(request_id=1, heartbeat_interval_ms=100))
        first = await call.read()
        assert (first.ack.request_id, first.ack.code) == (1, 0)  # liveness-only: acked OK
        beats = [await call.read() for _ in range(3)]
        now = time.time_ns() // 1_000_000
        for beat in beats:
            assert beat.heartbeat and not beat.HasField("ack") and not beat.outcomes
            assert now - 10_000 < beat.server_time_ms <= now
        # Frames still work, and an out-of-range interval is refused by its ack alone.
        watch = pb.OperationSpec(operation_id="w", timeout_ms=LONG)
        await frames.put(
            pb.SessionRequest(
                request_id=2, purgatory=NAME, watches=[watch], heartbeat_interval_ms=10
            )
        )
        await frames.put(pb.SessionRequest(request_id=3, purgatory=NAME, watches=[watch]))
        acks = {}
        while len(acks) < 2:
            msg = await call.read()
            if msg.HasField("ack"):
                acks[msg.ack.request_id] = msg.ack
        assert acks[2].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert "heartbeat_interval_ms" in acks[2].message
        assert acks[3].code == 0 and acks[3].operations[0].created
        await frames.put(pb.SessionRequest(request_id=4, heartbeat_interval_ms=60_000))
        msg = await call.read()
        while not msg.HasField("ack"):
            msg = await call.read()  # heartbeats sent before the new interval took hold
        assert msg.ack.request_id == 4
        await stub.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id="w"))
        outcome = await call.read()
        assert [e.operation_id for e in outcome.outcomes] == ["w"]  # no heartbeat in 60 s
    finally:
        await frames.put(None)
        call.cancel()
        await channel.close()
        await server.stop(0.5)


async def test_async_session_surfaces_heartbeats_and_detects_a_dead_stream(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            async with c.session(heartbeat_interval_ms=100, dead_after_s=5.0) as session:
                ack = await session.send(watches=[OperationSpec((), LONG, operation_id="a")])
                assert ack.error is None
                await _until(lambda: session.liveness.heartbeats >= 2)
                assert session.liveness.server_time_ms > 0
                await c.force_complete("a")
                events = session.outcomes()
                event = await anext(events)
                assert (event.operation_id, event.state) == ("a", OperationState.FORCE_COMPLETED)
            # Heartbeats every 60 s, but silence for 0.3 s counts as dead: the stream ends
            # with UnavailableError and an unanswered acknowledgement fails with it.
            started = time.monotonic()
            async with c.session(heartbeat_interval_ms=60_000, dead_after_s=0.3) as silent:
                with pytest.raises(UnavailableError, match="treated as dead"):
                    async for _ in silent.outcomes():
                        pass
                assert 0.25 < time.monotonic() - started < 10
                with pytest.raises(UnavailableError):
                    await silent.send(watches=[OperationSpec((), LONG, operation_id="b")])
            with pytest.raises(InvalidArgumentError, match="dead_after_s"):
                c.session(dead_after_s=1.0)
            # An interval the server refuses ends the session with that error.
            async with c.session(heartbeat_interval_ms=50) as refused:
                with pytest.raises(InvalidArgumentError, match="heartbeat_interval_ms"):
                    async for _ in refused.outcomes():
                        pass
    finally:
        await server.stop(0.5)


def test_sync_session_surfaces_heartbeats_and_detects_a_dead_stream(tmp_path: Path) -> None:
    with (
        ServerThread(config_for("memory", tmp_path)) as st,
        PurgatoryClient(st.target, purgatory=NAME, timeout=10) as c,
    ):
        with c.session(heartbeat_interval_ms=100, dead_after_s=5.0) as session:
            assert session.send(watches=[OperationSpec((), LONG, operation_id="s")]).error is None
            deadline = time.monotonic() + 10
            while session.liveness.heartbeats < 2:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            c.force_complete("s")
            assert next(session.outcomes()).operation_id == "s"
            assert not session.finished
        started = time.monotonic()
        with c.session(heartbeat_interval_ms=60_000, dead_after_s=0.3) as silent:
            with pytest.raises(UnavailableError, match="treated as dead"):
                list(silent.outcomes())
            assert 0.25 < time.monotonic() - started < 10
        with (
            c.session(heartbeat_interval_ms=50) as refused,
            pytest.raises(InvalidArgumentError, match="heartbeat_interval_ms"),
        ):
            list(refused.outcomes())
