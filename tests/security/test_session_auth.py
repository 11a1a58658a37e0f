"""The Session stream behind the edge: authenticated once per stream, each frame checked
for the permissions its parts need; an undecodable frame ends the stream."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    FailedPreconditionError,
    NotFoundError,
    OperationSpec,
    PermissionDeniedError,
    UnauthenticatedError,
)
from purgatory_server._service import ServerConfig

from tests.security.conftest import SIGNALLER, WATCHER


def _client(port: int, token: str | None) -> AsyncPurgatoryClient:
    return AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, token=token, trust_env=False)


async def test_each_frame_needs_the_permissions_of_its_parts(
    serve: Any, token_config: ServerConfig
) -> None:
    _, port = await serve(token_config)
    spec = OperationSpec(("k",), 60_000, operation_id="auth-1")
    async with _client(port, WATCHER) as watcher, watcher.session() as session:
        ack = await session.send(watches=[spec])
        assert ack.error is None and ack.operations[0].created
        refused = await session.send(watches=[spec], signals=["k"])  # no signal permission
        assert isinstance(refused.error, PermissionDeniedError)
        assert refused.operations == ()
        elsewhere = await session.send(purgatory="other", watches=[spec])
        assert isinstance(elsewhere.error, PermissionDeniedError)
        assert (await session.send(watches=[spec])).error is None  # the stream goes on
    async with _client(port, SIGNALLER) as signaller, signaller.session() as session:
        ack = await session.send(signals=["k"])
        assert ack.error is None and ack.completed_per_signal == (1,)


async def test_no_token_ends_the_stream_unauthenticated(
    serve: Any, token_config: ServerConfig
) -> None:
    _, port = await serve(token_config)
    async with _client(port, None) as client:
        session = client.session()
        with pytest.raises(UnauthenticatedError):
            await session.send(signals=["k"])
        assert isinstance(session.error, UnauthenticatedError)
        await session.close()


async def test_an_undecodable_frame_ends_the_stream_invalid_argument(serve: Any) -> None:
    _, port = await serve()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream("/purgatory.v1.PurgatoryService/Session")()
        await call.write(b"\xff\xff\xff")
        await call.done_writing()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async for _ in call:
                pass
    assert ended.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "request: cannot be decoded" in (ended.value.details() or "")


async def test_only_the_token_that_named_a_session_resumes_it(
    serve: Any, token_config: ServerConfig
) -> None:
    _, port = await serve(token_config)
    spec = OperationSpec(("k",), 60_000, operation_id="auth-resume")
    async with _client(port, WATCHER) as watcher:
        first = watcher.session(session_id="mine")
        assert (await first.send(watches=[spec])).error is None
        await first.close()  # parked: one watch still open
    async with _client(port, SIGNALLER) as other:
        stolen = other.session(session_id="mine", resume_after=0)
        with pytest.raises(NotFoundError):  # another token's session is not found
            await stolen.send(signals=["unwatched"])
        await stolen.close()
    async with _client(port, WATCHER) as watcher:
        for _ in range(200):  # until the server has seen the first stream end
            mine = watcher.session(session_id="mine", resume_after=0)
            try:
                assert (await mine.send(watches=[])).error is None
                break
            except FailedPreconditionError:
                await mine.close()
                await asyncio.sleep(0.02)
        await mine.close()
