"""Debounce (extend_on_resend, max_extend_ms): MockTime in memory, and a durable server
killed with SIGKILL in between (the policy and the pushed deadline survive)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from purgatory_client import OperationSpec, OperationState, PurgatoryClient
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server import MockTime
from purgatory_server._service import create_server

from tests.delayed.helpers import EXPIRED, WATCHING, config_for
from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME


def _debounced(op_id: str, timeout_ms: int, cap: int = 0, **extra: Any) -> Any:
    return pb.TryCompleteElseWatchRequest(
        purgatory=NAME,
        operation_id=op_id,
        keys=["k"],
        timeout_ms=timeout_ms,
        extend_on_resend=True,
        max_extend_ms=cap,
        **extra,
    )


async def test_resend_pushes_the_deadline_back_up_to_the_cap(tmp_path: Path) -> None:
    clock = MockTime()
    server, port = await create_server(
        "127.0.0.1:0", config_for("memory", tmp_path), time=clock, reaper_enabled=False
    )
    purgatory = server.registry.get(NAME)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]

    async def state(op_id: str) -> Any:
        purgatory.advance_clock(0)
        got = await stub.GetOperation(pb.GetOperationRequest(purgatory=NAME, operation_id=op_id))
        return got.operation

    try:
        first = await stub.TryCompleteElseWatch(_debounced("flush", 1_000, 2_500))
        t0 = first.create_time_ms
        assert (first.created, first.due_time_ms) == (True, t0 + 1_000)
        plain = await stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory=NAME, operation_id="plain", keys=["k"], timeout_ms=1_000
            )
        )
        clock.sleep(800)
        again = await stub.TryCompleteElseWatch(_debounced("flush", 1_000, 2_500))
        assert (again.created, again.state, again.due_time_ms) == (False, WATCHING, t0 + 1_800)
        # Without the option a re-send changes nothing (idempotent, as before).
        same = await stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory=NAME, operation_id="plain", keys=["k"], timeout_ms=1_000
            )
        )
        assert same.due_time_ms == plain.due_time_ms
        clock.sleep(800)  # t0 + 1600: "plain" expired, "flush" was pushed to t0 + 1800
        assert (await state("plain")).state == EXPIRED
        assert (await state("flush")).state == WATCHING
        # The policy is the operation's: a re-send without the options still extends,
        # and the cap (t0 + 2500) holds however often it is re-sent.
        capped = await stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory=NAME, operation_id="flush", keys=["k"], timeout_ms=1_000
            )
        )
        assert capped.due_time_ms == t0 + 2_500
        clock.sleep(800)
        assert (
            await stub.TryCompleteElseWatch(_debounced("flush", 1_000, 2_500))
        ).due_time_ms == t0 + 2_500
        clock.sleep(99)
        assert (await state("flush")).state == WATCHING
        clock.sleep(1)
        done = await state("flush")
        assert (done.state, done.complete_time_ms) == (EXPIRED, t0 + 2_500)
        # Once ended, a re-send answers with the outcome and moves nothing.
        late = await stub.TryCompleteElseWatch(_debounced("flush", 1_000, 2_500))
        assert (late.created, late.state, late.sequence) == (False, EXPIRED, done.sequence)
        # No cap: every re-send pushes to now + timeout. A batch re-send extends too.
        await stub.TryCompleteElseWatch(_debounced("open", 1_000))
        for _ in range(5):
            clock.sleep(900)
            batch = await stub.BatchTryCompleteElseWatch(
                pb.BatchTryCompleteElseWatchRequest(
                    purgatory=NAME,
                    operations=[
                        pb.OperationSpec(
                            operation_id="open", keys=["k"], timeout_ms=1_000, extend_on_resend=True
                        )
                    ],
                )
            )
            assert batch.operations[0].due_time_ms == clock.wall_clock_ms() + 1_000
        assert (await state("open")).state == WATCHING
    finally:
        await channel.close()
        await server.stop(0.5)


async def test_debounce_refusals_and_all_or_nothing(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    try:
        for request, field in (
            (
                _debounced("a", 0, due_time_ms=time.time_ns() // 1_000_000 + 60_000),
                "extend_on_resend",
            ),
            (_debounced("a", 10_000, 5_000), "max_extend_ms"),
            (_debounced("a", 10_000, 10**15), "max_extend_ms"),
            (
                pb.TryCompleteElseWatchRequest(
                    purgatory=NAME, operation_id="a", timeout_ms=1_000, max_extend_ms=5_000
                ),
                "max_extend_ms",
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.TryCompleteElseWatch(request)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in (info.value.details() or "")
        first = await stub.TryCompleteElseWatch(_debounced("b", 60_000))
        await asyncio.sleep(0.02)
        bad = pb.BatchTryCompleteElseWatchRequest(
            purgatory=NAME,
            operations=[
                pb.OperationSpec(
                    operation_id="b", keys=["k"], timeout_ms=60_000, extend_on_resend=True
                ),
                pb.OperationSpec(operation_id="c", keys=["k"], timeout_ms=0),
            ],
        )
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.BatchTryCompleteElseWatch(bad)
        got = await stub.GetOperation(pb.GetOperationRequest(purgatory=NAME, operation_id="b"))
        assert got.operation.due_time_ms == first.due_time_ms  # the failed batch moved nothing
    finally:
        await channel.close()
        await server.stop(0.5)


def test_debounce_survives_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cap = 60_000 + 1_500
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            first = c.try_complete_else_watch(
                ["k"], 60_000, operation_id="flush", extend_on_resend=True, max_extend_ms=cap
            )
            time.sleep(0.05)
            pushed = c.batch_try_complete_else_watch(
                [
                    OperationSpec(
                        ("k",),
                        60_000,
                        operation_id="flush",
                        extend_on_resend=True,
                        max_extend_ms=cap,
                    )
                ]
            )[0]
            assert pushed.due_time_ms > first.due_time_ms and not pushed.created
    finally:
        proc.kill()
    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            back = c.get_operation("flush")
            assert back.state is OperationState.WATCHING
            assert (back.create_time_ms, back.due_time_ms) == (
                first.create_time_ms,
                pushed.due_time_ms,
            )
            # Past the cap's reach: a re-send now lands exactly on create + cap, which only
            # happens if the policy (extend_on_resend and max_extend_ms) was recovered.
            wait_s = (first.create_time_ms + 1_600 - time.time_ns() // 1_000_000) / 1000
            time.sleep(max(0.0, wait_s))
            again = c.try_complete_else_watch(["k"], 60_000, operation_id="flush")
            assert not again.created
            assert again.due_time_ms == first.create_time_ms + cap
    finally:
        proc.stop()
