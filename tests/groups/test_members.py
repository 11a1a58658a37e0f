"""Worker groups end to end on a real server: competing members, a member that dies
mid-lease, a poison outcome through the dead letters and back, and the errors."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator

import pytest
from purgatory_client import (
    AsyncDelivery,
    AsyncPurgatoryClient,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OperationState,
    PurgatoryClient,
    ResourceExhaustedError,
)
from purgatory_server._service import Limits, ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.service.helpers import TEST_DATA_DIR, ServerThread

VIS = 2_000  # ms: generous, so a loaded machine never loses a lease by slowness
CONFIG = ServerConfig(
    listen="127.0.0.1:0",
    data_dir=TEST_DATA_DIR,  # never the checkout's ./data
    grace_s=0.5,
    limits=Limits(max_groups=2, max_group_backlog=200),
    purgatories=(PurgatorySettings(name="orders", retained_events=1000),),
)


@pytest.fixture
async def target() -> AsyncIterator[str]:
    server, port = await create_server("127.0.0.1:0", CONFIG)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0.5)


async def until(predicate, timeout_s: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_three_members_one_dies_mid_lease_nothing_lost(target: str) -> None:
    acked: dict[str, list[tuple[str, int]]] = {}
    lost_by_dead: dict[str, int] = {}  # op id -> its lease deadline when the member died
    late: list[tuple[str, float, int]] = []  # (op, received at, the dead lease's deadline)

    async def worker(name: str) -> None:
        async with AsyncPurgatoryClient(target, purgatory="orders") as client:
            stream = await client.join_group("billing", visibility_timeout_ms=VIS, prefetch=3)
            async for d in stream:
                assert isinstance(d, AsyncDelivery)
                if d.operation_id in lost_by_dead:
                    late.append((d.operation_id, time.time() * 1000, lost_by_dead[d.operation_id]))
                await d.ack()
                # Counted once the server has taken the ack (Ack is unary): counted before,
                # the test could read the group while the last ack was still on its way.
                acked.setdefault(d.operation_id, []).append((name, d.attempt))

    async def doomed() -> None:
        client = AsyncPurgatoryClient(target, purgatory="orders")
        async for d in await client.join_group("billing", visibility_timeout_ms=VIS, prefetch=3):
            # Takes the outcome, "crashes" before acting: the channel dies with its stream.
            lost_by_dead[d.operation_id] = d.lease_deadline_ms
            break
        await client.close()

    async with AsyncPurgatoryClient(target, purgatory="orders") as producer:
        dying = asyncio.create_task(doomed())
        # The doomed member joins first (creating the group) and gets the first outcome.
        while not any(g.members for g in await producer.list_groups()):
            await asyncio.sleep(0.01)
        await producer.try_complete_else_watch([], 20, operation_id="order-0")
        await asyncio.wait_for(dying, 10)
        assert list(lost_by_dead) == ["order-0"]
        workers = [asyncio.create_task(worker(n)) for n in ("a", "b")]
        try:
            for i in range(1, 30):
                await producer.try_complete_else_watch([], 20 + 10 * i, operation_id=f"order-{i}")
            await until(lambda: len(acked) == 30 or any(w.done() for w in workers))
            (group,) = await producer.list_groups()
            assert (group.ready, group.leased, group.dead_letters) == (0, 0, 0)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
    # Every expired order was acted on (acked) exactly once, by a live member.
    assert sorted(acked) == sorted(f"order-{i}" for i in range(30))
    assert all(len(v) == 1 and v[0][0] in "ab" for v in acked.values())
    # The dead member's outcome came back only after its lease ran out, as attempt 2.
    assert acked["order-0"][0][1] == 2
    ((op, received_ms, deadline_ms),) = late
    assert op == "order-0" and received_ms >= deadline_ms - 50  # clocks: same host
    assert {n for v in acked.values() for n, _ in v} == {"a", "b"}  # both competed


def test_poison_outcome_dead_letters_and_redrive_sync_client() -> None:
    with (
        ServerThread(CONFIG) as server,
        PurgatoryClient(server.target, purgatory="orders", timeout=10) as client,
    ):
        stream = client.join_group("poison", visibility_timeout_ms=100, max_attempts=3)
        client.try_complete_else_watch([], 10, operation_id="bad-order")
        attempts = []
        for d in stream:  # never acked: redelivered until it is out of attempts
            attempts.append(d.attempt)
            assert d.state is OperationState.EXPIRED and d.group == "poison"
            if d.attempt == 3:
                break
        stream.close()
        deadline = time.monotonic() + 10
        while not client.list_dead_letters("poison").dead_letters:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        page = client.list_dead_letters("poison")
        ((dead,),) = (page.dead_letters,)
        assert attempts == [1, 2, 3]
        assert (dead.operation_id, dead.attempt, page.next_after_sequence) == ("bad-order", 3, 0)
        assert client.redrive("poison") == [dead.sequence]
        again = client.join_group("poison")
        d = next(again)
        assert (d.operation_id, d.attempt) == ("bad-order", 4)  # numbers never repeat
        d.ack()
        again.close()
        with pytest.raises(NotFoundError):
            client.ack("poison", d.sequence)
        assert client.list_dead_letters("poison").dead_letters == ()


async def test_errors_and_limits(target: str) -> None:
    async with AsyncPurgatoryClient(target, purgatory="orders", timeout=10) as client:
        with pytest.raises(NotFoundError):
            await client.ack("nobody", 1)
        with pytest.raises(InvalidArgumentError, match="group"):
            await client.ack("bad name!", 1)
        with pytest.raises(InvalidArgumentError, match="sequence"):
            await client.ack("nobody", 0)
        with pytest.raises(InvalidArgumentError, match="visibility_timeout_ms"):
            await client.join_group("g1", visibility_timeout_ms=1)
        first = await client.join_group("g1", visibility_timeout_ms=VIS)
        await client.try_complete_else_watch([], 10, operation_id="x")
        d = await first.__anext__()
        assert d.attempt == 1
        with pytest.raises(FailedPreconditionError, match="lease lost"):
            await client.extend_lease("g1", d.sequence, 2)
        assert await d.extend(5_000) >= d.lease_deadline_ms
        with pytest.raises(FailedPreconditionError, match="max_attempts"):
            await client.join_group("g1", max_attempts=9)
        second = await client.join_group("g2")
        with pytest.raises(ResourceExhaustedError, match="max_groups"):
            await client.join_group("g3")
        await second.aclose()
        assert await client.delete_group("g2") == 0
        with pytest.raises(NotFoundError):
            await client.list_dead_letters("g2")
        await d.ack()
        await first.aclose()


async def test_member_process_killed_mid_lease(target: str) -> None:
    """A member that is a separate process (the CLI), SIGKILLed holding a lease."""
    async with AsyncPurgatoryClient(target, purgatory="orders", timeout=10) as client:
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "purgatory_client.cli",
            "--target",
            target,
            "--purgatory",
            "orders",
            "subscribe",
            "--group",
            "killed",
            "--visibility-timeout-ms",
            str(VIS),
            "--prefetch",
            "1",
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            while not any(g.members for g in await client.list_groups()):
                await asyncio.sleep(0.01)
            await client.try_complete_else_watch([], 10, operation_id="order-k")
            assert cli.stdout is not None
            line = await asyncio.wait_for(cli.stdout.readline(), 15)
            held = json.loads(line)
            assert (held["operation_id"], held["attempt"]) == ("order-k", 1)
        finally:
            cli.kill()  # SIGKILL, mid-lease: it never acks
            await cli.wait()
        survivor = await client.join_group("killed")
        d = await asyncio.wait_for(survivor.__anext__(), 15)
        assert (d.operation_id, d.attempt) == ("order-k", 2)
        assert time.time() * 1000 >= held["lease_deadline_ms"] - 50
        await d.ack()
        await survivor.aclose()
        (group,) = await client.list_groups()
        assert (group.ready, group.leased, group.dead_letters) == (0, 0, 0)
