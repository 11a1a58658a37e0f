"""Long-polls re-sent after UNAVAILABLE by operation id: gRPC's retry policy for a blip,
the client's resume policy across a server restart, in both clients."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    DeadlineExceededError,
    OperationSpec,
    OperationState,
    OperationStatus,
    PurgatoryClient,
    ResumePolicy,
    UnavailableError,
)
from purgatory_client._long_poll import SERVICE_CONFIG
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME


class FlakyService(pb_grpc.PurgatoryServiceServicer):
    """Answers the first ``failures`` registrations with UNAVAILABLE, then echoes the id."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.seen: list[str] = []

    async def TryCompleteElseWatch(
        self, request: pb.TryCompleteElseWatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.TryCompleteElseWatchResponse:
        self.seen.append(request.operation_id)
        if len(self.seen) <= self.failures:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return pb.TryCompleteElseWatchResponse(
            operation_id=request.operation_id, state=pb.OPERATION_STATE_COMPLETED
        )


def test_docs_show_the_service_config_the_clients_install() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "clients.md").read_text()
    [shown] = re.findall(r"```json\n(.*?)```", docs, re.S)
    assert json.loads(shown) == json.loads(SERVICE_CONFIG)


@pytest.fixture
async def flaky() -> AsyncIterator[tuple[FlakyService, str]]:
    service = FlakyService(failures=2)
    server = grpc.aio.server()
    pb_grpc.add_PurgatoryServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield service, f"127.0.0.1:{port}"
    finally:
        await server.stop(0.5)


async def test_grpc_retry_policy_resends_the_same_client_made_id(
    flaky: tuple[FlakyService, str],
) -> None:
    service, target = flaky
    # No resume attempts: only gRPC's own retry policy (the channel's service config)
    # can turn two UNAVAILABLE answers into a success.
    async with AsyncPurgatoryClient(target, resume=ResumePolicy(attempts=0)) as client:
        status = await client.try_complete_else_watch(["k"], 1000)
    assert status.state is OperationState.COMPLETED
    assert len(service.seen) == 3 and len(set(service.seen)) == 1
    assert service.seen[0] and status.operation_id == service.seen[0]


async def test_without_the_service_config_unavailable_surfaces(
    flaky: tuple[FlakyService, str],
) -> None:
    service, target = flaky
    options = [("grpc.service_config", "{}")]  # the caller's own config wins
    async with AsyncPurgatoryClient(
        target, resume=ResumePolicy(attempts=0), options=options
    ) as client:
        with pytest.raises(UnavailableError):
            await client.try_complete_else_watch(["k"], 1000)
    assert len(service.seen) == 1


async def test_long_poll_resends_by_the_resume_policy(flaky: tuple[FlakyService, str]) -> None:
    service, target = flaky
    service.failures = 7  # more than gRPC's 3 attempts: the client's loop re-sends
    policy = ResumePolicy(attempts=3, initial_delay_s=0.01, max_delay_s=0.05)
    async with AsyncPurgatoryClient(target, resume=policy) as client:
        status = await client.wait(["k"], 1000, operation_id="mine")
    assert status.state is OperationState.COMPLETED
    assert set(service.seen) == {"mine"} and len(service.seen) == 8


async def test_the_call_timeout_bounds_the_resends(flaky: tuple[FlakyService, str]) -> None:
    service, target = flaky
    service.failures = 10**9  # never comes back
    forever = ResumePolicy.forever(max_delay_s=0.05)
    async with AsyncPurgatoryClient(target, resume=forever) as client:
        started = time.monotonic()
        # The last attempt gets what is left of the deadline, so either error may end it.
        with pytest.raises((UnavailableError, DeadlineExceededError)):
            await client.wait(["k"], 1000, timeout=1.5)
        assert time.monotonic() - started < 10
    # Re-sent past gRPC's own 3 attempts (the resume policy), always the same operation.
    assert len(set(service.seen)) == 1 and len(service.seen) > 3, service.seen


def _async_batch_wait(target: str) -> list[OperationStatus]:
    async def run() -> list[OperationStatus]:
        async with AsyncPurgatoryClient(target, purgatory=NAME, resume=RIDE_OUT) as client:
            specs = [OperationSpec(("async-k",), 600_000)]  # no id: the client makes one
            return await client.batch_try_complete_else_watch(specs, wait=True, timeout=60)

    return asyncio.run(run())


# Rides out a restart of ~30 s at most; the test's deadlines bound it anyway.
RIDE_OUT = ResumePolicy(attempts=120, initial_delay_s=0.05, max_delay_s=0.25)


def test_long_polls_survive_a_durable_server_restart_on_the_same_port(tmp_path: Path) -> None:
    # The restart binds the port the first start reported (the clients' target).
    server = DurableServer(tmp_path / "data", "always", tmp_path / "server.log")
    try:
        server.wait_port()
        target = server.address
        with (
            PurgatoryClient(target, purgatory=NAME, resume=RIDE_OUT) as waiter,
            ThreadPoolExecutor(2) as pool,
        ):
            # No operation ids: the clients make them, so a re-send is the same operation.
            sync_result = pool.submit(waiter.wait, ["sync-k"], 600_000, timeout=60)
            batch_result = pool.submit(_async_batch_wait, target)
            with PurgatoryClient(target, purgatory=NAME, timeout=5) as probe:
                _until(lambda: probe.get_purgatory().pending == 2)
                # Pending is counted before the journal write is synced; one acknowledged
                # registration after them means the journal (written in order) holds both.
                probe.try_complete_else_watch(["barrier"], 600_000, operation_id="barrier")
            server.kill()
            assert not sync_result.done() and not batch_result.done()
            server.start().wait_port()
            with PurgatoryClient(target, purgatory=NAME, timeout=5) as probe:
                # This process's channels to the target share a connection, backing off
                # since the kill: wait until it is up again.
                _until(lambda: _reachable(probe))
                # The recovered operations complete; the waiters get the outcome either
                # from their re-sent long-poll or, re-sent later, as the retained outcome.
                assert probe.check_and_complete("sync-k") == 1
                assert probe.check_and_complete("async-k") == 1
                status = sync_result.result(60)
                [batch_status] = batch_result.result(60)
                for got in (status, batch_status):
                    assert got.state is OperationState.COMPLETED
                    assert got.created is False  # answered to a re-send of the same id
                    assert probe.get_operation(got.operation_id).state is got.state
                info = probe.get_purgatory()
                # Registered once each: two outcomes in all, only the barrier pending.
                assert (info.pending, info.last_sequence) == (1, 2)
    finally:
        server.stop()


def _reachable(client: PurgatoryClient) -> bool:
    try:
        client.get_purgatory()
    except UnavailableError:
        return False
    return True


def _until(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)
