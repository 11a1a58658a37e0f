"""Worker-group state survives a kill -9 of the owner and a standby's takeover (issue 42).

Servers A (owner: placement ranks it first) and B (standby) replicate purgatory
``grouped``. On A, group ``retry`` (fixed 10 s backoff, 120 s leases) gets o0..o4: o0 and
o1 acked, o2 nacked into the group's backoff, o3 nacked with a 120 s delay, o4 left leased;
o5 and o6 arrive once its member left (ready). Group ``rl`` (3 deliveries per 120 s) has
delivered and acked three. A is SIGKILLed; once B serves the purgatory:

- ``ListGroups`` on B shows both groups' settings and counts as A left them;
- a member joining ``retry`` at B gets o5 and o6 (attempt 1), and o2 only once its
  backoff ended (delivered at or after the ``redeliver_at_ms`` A answered), as attempt 2;
  never o0, o1 (acked), o3 (still waiting) or o4 (still leased: B acks its attempt 1);
  a late nack of o3's attempt 1 at B brings it back as attempt 2;
- a member joining ``rl`` at B gets nothing while the window A filled is still open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from purgatory_client import (
    AsyncDelivery,
    AsyncPurgatoryClient,
    GroupInfo,
    GroupRateLimit,
    GroupSelection,
    RetryBackoff,
)
from purgatory_server._cluster.natsd import LocalNatsCluster

from tests.cluster.servers import ReplicatedServer, by_rank, wait_owner

logger = logging.getLogger(__name__)
NAME = "grouped"
VIS = 120_000  # ms: no lease runs out during the test, on A or on B
BACKOFF = RetryBackoff("fixed", 10_000)  # longer than a takeover on a quiet machine
WINDOW_MS = 120_000  # outlasts the test
RATE = GroupSelection(rate_limit=GroupRateLimit(3, WINDOW_MS))
TAKEOVER_BOUND_S = 30.0  # lease 1.5 s + catch-up, on a loaded shared 2-core machine
EARLY_MS = 50  # timing-wheel and clock-reading slack of a "due" check


async def _until(predicate: Callable[[], Awaitable[bool]], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def _group(client: AsyncPurgatoryClient, name: str) -> GroupInfo:
    (group,) = [g for g in await client.list_groups() if g.name == name]
    return group


async def _counts(client: AsyncPurgatoryClient, name: str, counts: tuple[int, ...]) -> bool:
    """(ready, leased, retrying, dead letters) of group ``name`` are ``counts``."""
    g = await _group(client, name)
    return (g.ready, g.leased, g.retrying, g.dead_letters) == counts


def _delivered_ms(d: AsyncDelivery) -> int:
    """When the server leased it (its clock): the lease's deadline less the lease."""
    return d.lease_deadline_ms - VIS


async def _timers(client: AsyncPurgatoryClient, *ops: str) -> None:
    """Operations due at once (10 ms), in order: each becomes one outcome."""
    for op in ops:
        await client.try_complete_else_watch([], 10, operation_id=op)


async def _before_the_kill(
    client: AsyncPurgatoryClient,
) -> tuple[dict[str, AsyncDelivery], int, int]:
    """Group state on A (module docstring): the deliveries of ``retry``, o2's
    redelivery time and when ``rl``'s window opened (server clock, epoch ms)."""
    retry = await client.join_group(
        "retry", visibility_timeout_ms=VIS, max_attempts=5, backoff=BACKOFF
    )
    limited = await client.join_group("rl", visibility_timeout_ms=VIS, selection=RATE)
    await _timers(client, *(f"o{i}" for i in range(5)))
    held = {}
    for _ in range(5):
        d = await asyncio.wait_for(anext(retry), 15)
        assert d.attempt == 1
        held[d.operation_id] = d
    await held["o0"].ack()
    await held["o1"].ack()
    backoff_wait = await held["o2"].nack()  # the group's backoff: 10 s
    assert not backoff_wait.dead_letter
    long_wait = await held["o3"].nack(120_000)
    assert long_wait.redeliver_at_ms > time.time() * 1000 + 60_000
    opened = []
    for _ in range(3):  # the window's whole allowance
        d = await asyncio.wait_for(anext(limited), 15)
        opened.append(_delivered_ms(d))
        await d.ack()
    await retry.aclose()
    await limited.aclose()
    await _timers(client, "o5", "o6")
    await _until(lambda: _counts(client, "retry", (2, 1, 2, 0)))
    await _until(lambda: _counts(client, "rl", (4, 0, 0, 0)))
    return held, backoff_wait.redeliver_at_ms, min(opened)


async def _after_the_takeover(
    client: AsyncPurgatoryClient, held: dict[str, AsyncDelivery], backoff_at: int, opened: int
) -> None:
    retry, limited = await _group(client, "retry"), await _group(client, "rl")
    checked_ms = time.time() * 1000
    assert (retry.visibility_timeout_ms, retry.max_attempts) == (VIS, 5), retry
    assert retry.backoff == RetryBackoff("fixed", 10_000, 12 * 3600 * 1000), retry
    assert (retry.leased, retry.dead_letters, retry.ready + retry.retrying) == (1, 0, 4), retry
    if checked_ms < backoff_at - EARLY_MS:  # B took over within the backoff
        assert (retry.ready, retry.retrying) == (2, 2), retry
    assert limited.selection == RATE, limited
    assert (limited.ready, limited.leased, limited.retrying) == (4, 0, 0), limited

    # A member of the rate-limited group with room: the window A filled is still full.
    limited_stream = await client.join_group("rl")
    rl_seen: list[AsyncDelivery] = []

    async def read_limited() -> None:
        async for d in limited_stream:
            rl_seen.append(d)

    rl_task = asyncio.ensure_future(read_limited())
    stream = await client.join_group("retry")
    try:
        seen: dict[str, AsyncDelivery] = {}

        async def take(expected: dict[str, int]) -> None:
            while not set(expected) <= set(seen):
                d = await asyncio.wait_for(anext(stream), 30)
                assert d.operation_id in expected, (d.operation_id, d.attempt, sorted(seen))
                assert d.operation_id not in seen, (d.operation_id, d.attempt)
                assert d.attempt == expected[d.operation_id], (d.operation_id, d.attempt)
                seen[d.operation_id] = d
                await d.ack()

        await take({"o5": 1, "o6": 1, "o2": 2})
        # Not before the wait A recorded had ended.
        assert _delivered_ms(seen["o2"]) >= backoff_at - EARLY_MS, (
            _delivered_ms(seen["o2"]),
            backoff_at,
        )
        # o4's lease, recovered at B, is still attempt 1's; o3 still waits its 120 s and
        # its holder's late nack (attempt 1) counts at B.
        await client.ack("retry", held["o4"].sequence, attempt=1)
        await _until(lambda: _counts(client, "retry", (0, 0, 1, 0)))
        nacked = await client.nack("retry", held["o3"].sequence, attempt=1, delay_ms=0)
        assert not nacked.dead_letter
        await _timers(client, "o7")  # a marker: anything wrongly ready came before it
        await take({"o3": 2, "o7": 1})
        await _until(lambda: _counts(client, "retry", (0, 0, 0, 0)))
        # Nothing of rl's inside the window A opened (the test ends well within it).
        early = [(d.operation_id, _delivered_ms(d)) for d in rl_seen]
        assert all(at >= opened + WINDOW_MS - EARLY_MS for _, at in early), (opened, early)
        if not rl_seen:
            await _until(lambda: _counts(client, "rl", (5, 0, 0, 0)))
    finally:
        await stream.aclose()
        await limited_stream.aclose()
        rl_task.cancel()
        await asyncio.gather(rl_task, return_exceptions=True)


async def test_group_state_survives_owner_kill_and_takeover(
    nats_cluster: LocalNatsCluster, tmp_path: Path
) -> None:
    first, second = by_rank(NAME, 2)
    a = ReplicatedServer(tmp_path, "a", nats_cluster.urls, NAME, first)
    a.wait_port()
    assert await wait_owner([a], NAME, TAKEOVER_BOUND_S) == 0
    b = ReplicatedServer(tmp_path, "b", nats_cluster.urls, NAME, second)
    b.wait_port()
    client_a = AsyncPurgatoryClient(a.address, purgatory=NAME, timeout=10)
    client_b = AsyncPurgatoryClient(b.address, purgatory=NAME, timeout=10)
    try:
        held, backoff_at, opened = await _before_the_kill(client_a)
        a.kill()
        killed = time.monotonic()
        await wait_owner([b], NAME, TAKEOVER_BOUND_S)
        logger.info("B took over %.2fs after the kill", time.monotonic() - killed)
        await _after_the_takeover(client_b, held, backoff_at, opened)
    finally:
        await client_a.close()
        await client_b.close()
        a.stop()
        b.stop()
