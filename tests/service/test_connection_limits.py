"""Issue 22, abuse pattern 7 and the stream caps: connections and streams are bounded.

Pattern 7: idle TCP connections beyond the process's open-files limit must not lock a
well-behaved client out. The server runs under a small ``RLIMIT_NOFILE`` (``prlimit``);
its connection cap stays below it, connections past the cap are closed as they are
accepted, and connections that never finish their handshake are closed after
``handshake_timeout_ms``, so a new client gets in. The stream caps: Subscribe streams past
``max_subscribe_streams_per_connection`` or ``max_subscribe_streams`` are
RESOURCE_EXHAUSTED, and a slot frees up when a stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from purgatory_client import AsyncPurgatoryClient
from purgatory_client.errors import DeadlineExceededError, UnavailableError
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service.config.fd_limits import FD_HEADROOM, connection_cap

from harness import PURGATORY_SERVER, ServerProcess
from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG, until_subscribers

FD_LIMIT = 300
IDLE = 400  # raw connections opened: more than the server has descriptors


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
def test_idle_connections_past_the_fd_limit_do_not_lock_a_client_out(tmp_path: Path) -> None:
    command = ("prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", *PURGATORY_SERVER)
    config = "handshake_timeout_ms = 1000\nconnection_idle_ms = 1000\n"
    with ServerProcess(tmp_path, command=command, config=config) as server:
        idle: list[socket.socket] = []
        try:
            for _ in range(IDLE):  # connect, then never send a byte
                idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            started = time.monotonic()
            asyncio.run(_served(server.address))
            assert time.monotonic() - started < 25
        finally:
            for sock in idle:
                with contextlib.suppress(OSError):
                    sock.close()
        assert "Too many open files" not in server.log_text()


async def _served(target: str) -> None:
    """A well-behaved client: retries a refused connection, with a short back-off."""
    deadline = time.monotonic() + 20
    async with AsyncPurgatoryClient(target, timeout=5) as client:
        while True:
            try:
                info = await client.get_purgatory("default")
            except (UnavailableError, DeadlineExceededError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
                continue
            assert info.name == "default"
            return


def _own_channel(target: str) -> grpc.aio.Channel:
    """A channel with its own TCP connection (not shared with the process's others)."""
    return grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


async def _open(stub: pb_grpc.PurgatoryServiceStub) -> grpc.aio.UnaryStreamCall:
    call = stub.Subscribe(pb.SubscribeRequest(purgatory="default", heartbeat_interval_ms=0))
    await call.initial_metadata()
    return call


async def _refused(stub: pb_grpc.PurgatoryServiceStub, limit: str) -> None:
    call = stub.Subscribe(pb.SubscribeRequest(purgatory="default"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call.read()
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert limit in (info.value.details() or "")


async def test_subscribe_streams_are_capped_per_connection_and_per_server(
    serve: ServeFn,
) -> None:
    limits = replace(
        TEST_CONFIG.limits,
        max_subscribers=10,
        max_subscribe_streams=3,
        max_subscribe_streams_per_connection=2,
    )
    _, port = await serve(replace(TEST_CONFIG, limits=limits))
    target = f"127.0.0.1:{port}"
    async with (
        _own_channel(target) as first,
        _own_channel(target) as second,
        AsyncPurgatoryClient(target) as client,
    ):
        one = pb_grpc.PurgatoryServiceStub(first)
        two = pb_grpc.PurgatoryServiceStub(second)
        a = [await _open(one), await _open(one)]
        await _refused(one, "max_subscribe_streams_per_connection is 2")
        b = await _open(two)  # another connection still gets one: 3 on the server
        await _refused(two, "max_subscribe_streams is 3")
        a[0].cancel()  # a stream ends: its slot frees up
        await until_subscribers(client, 2)
        c = await _open(two)
        for call in (a[1], b, c):
            call.cancel()


def test_the_connection_cap_leaves_descriptors_to_the_server() -> None:
    assert connection_cap(10_000, 20_000) == 10_000
    assert connection_cap(10_000, 1024) == 1024 - FD_HEADROOM
    assert connection_cap(10_000, 300) == 150  # a small limit: half of it
    assert connection_cap(10_000, None) == 10_000  # no limit at all
    assert connection_cap(10_000, 1) == 1


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
def test_the_soft_fd_limit_is_raised_at_start_and_the_limits_logged(tmp_path: Path) -> None:
    command = ("prlimit", "--nofile=1024:4096", *PURGATORY_SERVER)
    with ServerProcess(tmp_path, command=command) as server:
        line = server.wait_log(r"limits: open files \d+, max_connections \d+").group(0)
        assert line == f"limits: open files 4096, max_connections {4096 - FD_HEADROOM}"
