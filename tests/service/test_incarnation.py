"""Stream incarnations: a resume never silently crosses a reset of the event stream.

An in-memory purgatory restarts its sequences at 1 when its server restarts; a
subscriber resuming with ``after_sequence`` must be told (FAILED_PRECONDITION, the
clients' StreamResetError), not served the new stream's events as if they followed the
old ones. A durable purgatory keeps its incarnation, so resuming across a restart is
gap-free.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    FailedPreconditionError,
    OperationSpec,
    PurgatoryClient,
    StreamResetError,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig, create_server

from tests.durability.helpers import NAME, durable_config
from tests.service.helpers import TEST_CONFIG, ServerThread

HEX16 = re.compile(r"[0-9a-f]{16}")


async def _complete(client: AsyncPurgatoryClient, prefix: str, n: int, name: str) -> None:
    specs = [
        OperationSpec((f"{prefix}{i}",), 60_000, operation_id=f"{prefix}{i}") for i in range(n)
    ]
    await client.batch_try_complete_else_watch(specs, purgatory=name)
    await client.batch_check_and_complete([f"{prefix}{i}" for i in range(n)], purgatory=name)


async def test_get_and_list_show_the_incarnation_new_per_creation(
    client: AsyncPurgatoryClient,
) -> None:
    first = await client.create_purgatory("inc")
    assert HEX16.fullmatch(first.incarnation)
    assert (await client.get_purgatory("inc")).incarnation == first.incarnation
    listed = {p.name: p.incarnation for p in await client.list_purgatories()}
    assert listed["inc"] == first.incarnation
    assert HEX16.fullmatch(listed["default"]) and listed["default"] != first.incarnation
    await client.delete_purgatory("inc")
    again = await client.create_purgatory("inc")
    assert HEX16.fullmatch(again.incarnation) and again.incarnation != first.incarnation


async def test_subscribe_header_and_incarnation_check(server: Any) -> None:
    port = server.port
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    try:
        info = await stub.GetPurgatory(pb.GetPurgatoryRequest(name="default"))
        current = info.purgatory.incarnation
        for asked in ("", current):
            call = stub.Subscribe(
                pb.SubscribeRequest(purgatory="default", after_sequence=0, incarnation=asked)
            )
            header = dict(await call.initial_metadata())
            assert header["purgatory-incarnation"] == current
            assert header["purgatory-start-after"] == "0"
            call.cancel()
        wrong = stub.Subscribe(
            pb.SubscribeRequest(purgatory="default", after_sequence=0, incarnation="x" * 5000)
        )
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            async for _ in wrong:
                pass
        err = raised.value
        assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "incarnation" in (err.details() or "")
        assert len(err.details() or "") < 300  # the 5,000-char value is not echoed whole
        assert dict(err.trailing_metadata())["purgatory-incarnation"] == current
    finally:
        await channel.close()


async def test_clients_raise_stream_reset_for_another_incarnation(
    client: AsyncPurgatoryClient,
) -> None:
    current = (await client.get_purgatory()).incarnation
    with pytest.raises(StreamResetError) as raised:
        async for _ in client.subscribe(after_sequence=0, incarnation="0123456789abcdef"):
            pass
    assert isinstance(raised.value, FailedPreconditionError)
    assert raised.value.incarnation == current
    assert raised.value.code is grpc.StatusCode.FAILED_PRECONDITION


def test_sync_client_raises_stream_reset(server_thread: ServerThread) -> None:
    with PurgatoryClient(server_thread.target, timeout=10) as sync_client:
        current = sync_client.get_purgatory().incarnation
        with pytest.raises(StreamResetError) as raised:
            next(iter(sync_client.subscribe(after_sequence=0, incarnation="0" * 16)))
        assert raised.value.incarnation == current


async def _restart_on(port: int, config: ServerConfig) -> Any:
    """A new server on ``port`` (retried briefly while the old socket is released)."""
    for _ in range(50):
        try:
            server, _ = await create_server(f"127.0.0.1:{port}", config)
            return server
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"port {port} not free again")


async def test_in_memory_restart_under_resuming_subscriber_raises_stream_reset() -> None:
    """The silent-loss case: the new server has issued sequences 1..5 of ITS stream by the
    time the subscriber resumes after 3; without incarnations the client would carry on
    with sequences 4 and 5 of another stream and never know."""
    server, port = await create_server("127.0.0.1:0", TEST_CONFIG)
    second = None
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
            stream = client.subscribe(after_sequence=0)
            await _complete(client, "old", 3, "default")
            got = [await asyncio.wait_for(anext(stream), 5) for _ in range(3)]
            assert [e.sequence for e in got] == [1, 2, 3]
            await server.stop(0.2)
            second = await _restart_on(port, TEST_CONFIG)
            await _complete(client, "new", 5, "default")
            with pytest.raises(StreamResetError) as raised:
                await asyncio.wait_for(anext(stream), 15)
            assert raised.value.incarnation == (await client.get_purgatory()).incarnation
            await stream.aclose()
    finally:
        await server.stop(0.2)
        if second is not None:
            await second.stop(0.2)


async def test_durable_purgatory_keeps_incarnation_and_resumes_gap_free(tmp_path: Path) -> None:
    config = durable_config(tmp_path)
    server, port = await create_server("127.0.0.1:0", config)
    second = None
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, purgatory=NAME) as client:
            before = (await client.get_purgatory()).incarnation
            assert HEX16.fullmatch(before)
            assert (tmp_path / NAME / "incarnation").read_text().strip() == before
            stream = client.subscribe(after_sequence=0)
            await _complete(client, "a", 2, NAME)
            got = [await asyncio.wait_for(anext(stream), 5) for _ in range(2)]
            await server.stop(0.2)
            second = await _restart_on(port, config)
            assert (await client.get_purgatory()).incarnation == before
            await _complete(client, "b", 3, NAME)
            got += [await asyncio.wait_for(anext(stream), 15) for _ in range(3)]
            assert [e.sequence for e in got] == [1, 2, 3, 4, 5]
            assert [e.operation_id for e in got] == ["a0", "a1", "b0", "b1", "b2"]
            await stream.aclose()
    finally:
        await server.stop(0.2)
        if second is not None:
            await second.stop(0.2)
