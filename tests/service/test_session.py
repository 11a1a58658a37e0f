"""The Session RPC: per-operation outcomes as they end, acknowledgements before outcomes,
frame errors that keep the stream, idempotent re-sends, and the slow-reader bound."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    DispatcherConfig,
    Event,
    InvalidArgumentError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import Limits
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG, ServerThread, config_with, pending


def _specs(n: int, prefix: str = "op", timeout_ms: int = 60_000) -> list[OperationSpec]:
    return [
        OperationSpec((f"{prefix}{i}",), timeout_ms, operation_id=f"{prefix}{i}") for i in range(n)
    ]


async def _next(events: object, timeout: float = 5.0) -> Event:
    return await asyncio.wait_for(events.__anext__(), timeout)  # type: ignore[attr-defined]


async def test_outcomes_arrive_per_operation_as_they_end(client: AsyncPurgatoryClient) -> None:
    async with client.session() as session:
        ack = await session.send(watches=_specs(10))
        assert ack.error is None
        assert [s.state for s in ack.operations] == [OperationState.WATCHING] * 10
        events = session.outcomes()
        await client.check_and_complete("op0")
        first = await _next(events)
        # The first of ten has its outcome while the other nine still wait.
        assert (first.operation_id, first.state) == ("op0", OperationState.COMPLETED)
        assert await pending(client) == 9
        await client.batch_check_and_complete([f"op{i}" for i in range(9, 0, -1)])
        rest = [await _next(events) for _ in range(9)]
        # In the order they ended.
        assert [e.operation_id for e in rest] == [f"op{i}" for i in range(9, 0, -1)]


async def test_first_of_ten_expiries_arrives_long_before_the_last(
    client: AsyncPurgatoryClient,
) -> None:
    specs = [
        OperationSpec((f"t{i}",), 20 if i == 0 else 2500, operation_id=f"t{i}") for i in range(10)
    ]
    start = time.monotonic()
    arrivals: list[float] = []
    async for event in client.watch_many(specs):
        assert event.state is OperationState.EXPIRED
        arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 10
    assert arrivals[0] < 1.5  # tolerant: the machine may be loaded
    assert arrivals[-1] >= 2.4


async def test_ack_precedes_outcomes_and_carries_those_ended_in_its_frame(
    server: object, client: AsyncPurgatoryClient
) -> None:
    port = server.port  # type: ignore[attr-defined]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.Session()
        await call.write(
            pb.SessionRequest(
                request_id=7,
                purgatory="default",
                watches=[pb.OperationSpec(operation_id="a", keys=["ka"], timeout_ms=60_000)],
                signals=[pb.KeySignal(key="ka")],
            )
        )
        first = await asyncio.wait_for(call.read(), 5)
        assert first.ack.request_id == 7 and first.ack.code == 0
        assert first.ack.operations[0].created
        assert list(first.ack.completed_per_signal) == [1]
        # The watch ended inside its own frame: its outcome rides on the same message.
        assert [o.operation_id for o in first.outcomes] == ["a"]
        result = first.outcomes[0].result
        assert (result.signal_count, list(result.signalled_keys)) == (1, ["ka"])
        assert first.outcomes[0].state == pb.OPERATION_STATE_COMPLETED
        await call.done_writing()
        assert await asyncio.wait_for(call.read(), 5) == grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK


async def test_a_bad_frame_is_refused_alone_and_the_stream_goes_on(
    client: AsyncPurgatoryClient,
) -> None:
    async with client.session() as session:
        bad = await session.send(watches=_specs(2), signals=[""])
        assert isinstance(bad.error, InvalidArgumentError)
        assert "signals[0].key" in bad.error.details
        assert bad.operations == ()
        assert await pending(client) == 0  # the frame changed nothing
        missing = await session.send(purgatory="nope", signals=["k"])
        assert missing.error is not None and missing.error.code == grpc.StatusCode.NOT_FOUND
        unknown = await session.send(force_complete=["never-registered"])
        assert unknown.error is not None and unknown.error.code == grpc.StatusCode.NOT_FOUND
        good = await session.send(watches=_specs(1, "g"), force_complete=["g0"])
        assert good.error is None and good.force_completed == (True,)
        event = await _next(session.outcomes())
        assert (event.operation_id, event.state) == ("g0", OperationState.FORCE_COMPLETED)


async def test_resend_by_id_on_a_new_stream_registers_nothing_new(
    client: AsyncPurgatoryClient,
) -> None:
    async with client.session() as first:
        ack = await first.send(watches=_specs(3, "r"))
        assert all(s.created for s in ack.operations)
    # The first stream is gone; its operations stay.
    async with client.session() as second:
        ack = await second.send(watches=_specs(3, "r"))
        assert not any(s.created for s in ack.operations)
        assert await pending(client) == 3
        # Re-sent twice on one stream: still one outcome per operation.
        await second.send(watches=_specs(3, "r"))
        await client.batch_check_and_complete(["r0", "r1", "r2"])
        await second.done_writing()
        seen = [e.operation_id async for e in second.outcomes()]
        assert sorted(seen) == ["r0", "r1", "r2"]
    # Re-sent after the end: the outcome again, nothing registered.
    async with client.session() as third:
        ack = await third.send(watches=_specs(1, "r"))
        assert ack.operations[0].state is OperationState.COMPLETED
        assert not ack.operations[0].created
        assert (await _next(third.outcomes())).operation_id == "r0"
    assert await pending(client) == 0


def _bulky_config() -> object:
    limits = replace(Limits(), session_buffer=16, max_payload_bytes=64 * 1024)
    settings = PurgatorySettings(name="default", max_pending=10_000, retained_events=100)
    return replace(TEST_CONFIG, limits=limits, defaults=settings, purgatories=(settings,))


async def test_a_reader_that_keeps_reading_is_not_cut(serve: ServeFn) -> None:
    _, port = await serve(_bulky_config())
    n = 120
    payload = b"x" * 60_000
    specs = [
        OperationSpec((f"c{i}",), 60_000, payload=payload, operation_id=f"c{i}") for i in range(n)
    ]
    async with (
        AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client,
        client.session() as session,
    ):
        for start in range(0, n, 10):
            assert (await session.send(watches=specs[start : start + 10])).error is None
        events = session.outcomes()
        for i in range(n):
            await client.check_and_complete(f"c{i}")
            assert (await _next(events)).operation_id == f"c{i}"
        assert not session.finished


async def _until_finished(session: object) -> None:
    while not session.finished:  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)


async def test_shutdown_ends_a_session_with_unavailable(serve: ServeFn) -> None:
    server, port = await serve()
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        session = client.session()
        await session.send(watches=_specs(2, "u"))
        await server.stop(0.2)
        await asyncio.wait_for(_until_finished(session), 10)
        assert session.error is not None
        assert session.error.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        await session.close()


def test_sync_session_and_watch_many(server_thread: ServerThread) -> None:
    with PurgatoryClient(server_thread.target, timeout=10) as client:
        with client.session() as session:
            ack = session.send(watches=_specs(2, "y"), signals=["y1"])
            assert ack.error is None and ack.completed_per_signal == (1,)
            client.check_and_complete("y0")
            session.done_writing()
            assert sorted(e.operation_id for e in session.outcomes()) == ["y0", "y1"]
        specs = [OperationSpec(("w",), 5_000) for _ in range(3)]  # ids made by the client
        results = []
        for event in client.watch_many(specs):
            results.append(event)
            if len(results) == 1:
                client.check_and_complete("w")
        assert len(results) == 3 and len({e.operation_id for e in results}) == 3
        with pytest.raises(InvalidArgumentError):
            list(client.watch_many([OperationSpec(("",), 100)]))


def test_config_with_keeps_the_default_session_buffer() -> None:
    assert config_with().limits.session_buffer == Limits().session_buffer


async def test_async_dispatcher_against_the_server(client: AsyncPurgatoryClient) -> None:
    failed: list[tuple[list[object], Exception]] = []
    outcomes: list[Event] = []
    dispatcher = client.dispatcher(
        DispatcherConfig(max_batch_size=8, max_batching_delay_ms=1),
        on_outcome=outcomes.append,
        on_permanent_error=lambda holders, err: failed.append(([h.task_id for h in holders], err)),
    )
    async with dispatcher:
        watches = [dispatcher.watch(spec) for spec in _specs(20, "d")]
        statuses = await asyncio.gather(*watches)
        assert all(s.created and s.state is OperationState.WATCHING for s in statuses)
        # Three offsets for one key, one task id: only the newest is sent.
        offsets = [dispatcher.signal("d0", task_id="d0") for _ in range(3)]
        signals = [dispatcher.signal(f"d{i}") for i in range(1, 20)]
        assert await asyncio.gather(*offsets) == [1, 1, 1]
        assert await asyncio.gather(*signals) == [1] * 19
        forced = dispatcher.force_complete("d0")
        assert await forced is False  # already completed
        bad = dispatcher.signal("")
        with pytest.raises(InvalidArgumentError):
            await bad
    counters = dispatcher.counters
    assert counters.overridden == 2 and counters.failed == 1 and counters.retried == 0
    assert len(failed) == 1 and isinstance(failed[0][1], InvalidArgumentError)
    assert sorted(e.operation_id for e in outcomes) == sorted(f"d{i}" for i in range(20))
    assert await pending(client) == 0
