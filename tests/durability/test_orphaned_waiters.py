"""No orphaned waiter: an outcome whose journal write fails ends the calls waiting for it
with UNAVAILABLE (so clients re-send, to a new owner if there is one), never silence.

A real durable server on loopback; its journal's fsync is made to fail (EIO) once the
operations are registered, so the write holding their outcomes fails.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    FailedPreconditionError,
    OperationSpec,
    UnavailableError,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import create_server

from tests.durability.helpers import NAME, durable_config, watch
from tests.service.helpers import until


def _failing_fsync(fd: int) -> None:
    raise OSError(errno.EIO, "injected fsync failure")


async def test_failed_outcome_write_ends_long_poll_and_session_unavailable(
    tmp_path: Path,
) -> None:
    server, port = await create_server("127.0.0.1:0", durable_config(tmp_path))
    target = f"127.0.0.1:{port}"
    channel = grpc.aio.insecure_channel(target)
    try:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        purgatory = server.registry.get(NAME)
        feed = purgatory.feed
        request = watch("polled", ["k"], 60_000)
        request.wait = True  # the long-poll: answered when the operation ends
        long_poll = asyncio.ensure_future(stub.TryCompleteElseWatch(request))
        async with (
            AsyncPurgatoryClient(target, purgatory=NAME, timeout=10) as client,
            AsyncPurgatoryClient(target, purgatory=NAME, timeout=None) as no_deadline,
        ):
            session = client.session()
            ack = await session.send(watches=[OperationSpec(("k",), 60_000, operation_id="s1")])
            assert ack.error is None and ack.operations[0].created

            # The Python client's long-poll, without a deadline: it must end, not hang.
            waiting = asyncio.ensure_future(
                no_deadline.wait(["k"], 60_000, operation_id="client-polled")
            )

            async def both_waiting() -> bool:
                return (
                    feed.waiting("polled") == 1
                    and feed.waiting("s1") == 1
                    and feed.waiting("client-polled") == 1
                )

            await until(both_waiting, timeout_s=10)
            # From now on every write of the purgatory's journal fails.
            purgatory._journal._wal._files._fsync_fn = _failing_fsync
            with pytest.raises(grpc.aio.AioRpcError) as signalled:
                await stub.CheckAndComplete(pb.CheckAndCompleteRequest(purgatory=NAME, key="k"))
            assert signalled.value.code() is not grpc.StatusCode.OK
            # The outcomes were never written: both waiters end UNAVAILABLE, promptly.
            with pytest.raises(grpc.aio.AioRpcError) as polled:
                await asyncio.wait_for(long_poll, 5)
            assert polled.value.code() is grpc.StatusCode.UNAVAILABLE
            assert "journal" in (polled.value.details() or "")
            with pytest.raises(UnavailableError):
                await asyncio.wait_for(session.outcomes().__anext__(), 5)
            await session.close()
            # The client re-sent its long-poll after UNAVAILABLE; this server still cannot
            # write, so the re-send is refused too: the call ends, it does not wait on.
            with pytest.raises(FailedPreconditionError, match="cannot write its journal"):
                await asyncio.wait_for(waiting, 10)
    finally:
        long_poll.cancel()
        await channel.close()
        await server.stop(0.5)
