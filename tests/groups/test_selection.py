"""Priorities, ordering keys and rate limits of worker groups on a real server, through
the blocking client: what a member receives, ListGroups' settings, the errors, and a
durable purgatory killed with -9 mid-rate-limit (the window holds across the restart)
with an ordering key's lease running across it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from purgatory_client import (
    Delivery,
    FailedPreconditionError,
    FirstKey,
    GroupPriority,
    GroupRateLimit,
    GroupSelection,
    IdPrefix,
    InvalidArgumentError,
    PurgatoryClient,
)
from purgatory_server._service import Limits, ServerConfig
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME
from tests.service.helpers import TEST_DATA_DIR, ServerThread

VIS = 5_000  # ms: no lease runs out by slowness
URGENT = GroupPriority(10, operation_id_prefix="urgent/")
PURGATORIES = ("prio", "order", "rate", "errors")
CONFIG = ServerConfig(
    listen="127.0.0.1:0",
    data_dir=TEST_DATA_DIR,  # never the checkout's ./data
    grace_s=0.5,
    limits=Limits(max_groups=4, max_group_backlog=200),
    purgatories=tuple(PurgatorySettings(name=n, retained_events=1000) for n in PURGATORIES),
)


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with ServerThread(CONFIG) as server:
        yield server.target


def until(predicate: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def timers(client: PurgatoryClient, *ops: str | tuple[str, str]) -> None:
    """Operations due at once (10 ms), in order: each becomes one outcome."""
    for op in ops:
        op_id, keys = (op, []) if isinstance(op, str) else (op[0], [op[1]])
        client.try_complete_else_watch(keys, 10, operation_id=op_id)


def ready(client: PurgatoryClient, n: int) -> Callable[[], bool]:
    return lambda: client.list_groups()[0].ready == n


def delivered_ms(d: Delivery, vis: int = VIS) -> int:
    """When the server leased it (its clock): the lease's deadline less the lease."""
    return d.lease_deadline_ms - vis


def test_priority_overtakes_the_backlog(target: str) -> None:
    with PurgatoryClient(target, purgatory="prio", timeout=10) as client:
        selection = GroupSelection(priorities=(URGENT,))
        client.join_group("g", visibility_timeout_ms=VIS, selection=selection).close()
        timers(client, *(f"routine/{i}" for i in range(20)), "urgent/1")
        until(ready(client, 21))
        stream = client.join_group("g", prefetch=1)
        order = []
        for d in stream:
            order.append((d.operation_id, d.priority))
            d.ack()
            if len(order) == 21:
                break
        stream.close()
        assert order == [("urgent/1", 10)] + [(f"routine/{i}", 0) for i in range(20)]


def test_ordering_keys_with_priorities(target: str) -> None:
    with PurgatoryClient(target, purgatory="order", timeout=10) as client:
        selection = GroupSelection(priorities=(URGENT,), ordering_key=FirstKey())
        client.join_group("g", visibility_timeout_ms=VIS, selection=selection).close()
        timers(client, ("r1", "k1"), ("urgent/1", "k1"), ("urgent/2", "k2"))
        until(ready(client, 3))
        stream = client.join_group("g", prefetch=10)
        first, second = next(stream), next(stream)
        # Priority between keys; urgent/1 waits behind r1, its key's older outcome.
        assert [(d.operation_id, d.ordering_key) for d in (first, second)] == [
            ("urgent/2", "k2"),
            ("r1", "k1"),
        ]
        (group,) = client.list_groups()
        assert (group.leased, group.ready) == (2, 1)
        assert group.selection == selection
        second.ack()
        third = next(stream)
        assert (third.operation_id, third.ordering_key, third.priority) == ("urgent/1", "k1", 10)
        first.ack()
        third.ack()
        stream.close()


def test_rate_limit_sliding_window(target: str) -> None:
    window = 300
    with PurgatoryClient(target, purgatory="rate", timeout=10) as client:
        selection = GroupSelection(rate_limit=GroupRateLimit(2, window))
        stream = client.join_group("g", visibility_timeout_ms=VIS, selection=selection)
        timers(client, *(f"o{i}" for i in range(6)))
        times = []
        for d in stream:
            times.append(delivered_ms(d))
            d.ack()
            if len(times) == 6:
                break
        stream.close()
        # No window holds more than 2 deliveries: the third after any pair is a window on.
        pairs = zip(times[:-2], times[2:], strict=True)
        assert all(later - earlier >= window for earlier, later in pairs), times


def test_settings_are_checked_and_fixed(target: str) -> None:
    with PurgatoryClient(target, purgatory="errors", timeout=10) as client:
        with pytest.raises(InvalidArgumentError, match=r"selection\.rate_limit\.window_ms"):
            client.join_group("g", selection=GroupSelection(rate_limit=GroupRateLimit(1, 0)))
        with pytest.raises(InvalidArgumentError, match=r"operation_id_separator"):
            client.join_group("g", selection=GroupSelection(ordering_key=IdPrefix("")))
        client.join_group("g", selection=GroupSelection(ordering_key=IdPrefix())).close()
        with pytest.raises(FailedPreconditionError, match="another selection"):
            client.join_group("g", selection=GroupSelection(ordering_key=FirstKey()))
        (group,) = client.list_groups()
        assert group.selection == GroupSelection(ordering_key=IdPrefix("/"))


# The window outlasts any restart (the server's start is bounded by 15 s), so after the
# restart it must still be full: checked at once, without waiting it out.
WINDOW_MS = 60_000
LEASE_MS = 120_000  # the ordered group's lease outlives any restart too


def test_rate_limit_and_ordering_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rate = GroupSelection(rate_limit=GroupRateLimit(3, WINDOW_MS))
    ordered = GroupSelection(ordering_key=FirstKey())
    server = DurableServer(data, "always", tmp_path / "server.log")
    try:
        with PurgatoryClient(f"127.0.0.1:{server.wait_port()}", purgatory=NAME, timeout=10) as c:
            limited = c.join_group("rl", visibility_timeout_ms=VIS, selection=rate)
            keyed = c.join_group("ord", visibility_timeout_ms=LEASE_MS, selection=ordered)
            timers(c, *((f"o{i}", "k") for i in range(5)))
            before = [next(limited) for _ in range(3)]
            for d in before:
                d.ack()
            held = next(keyed)  # o0 of key k, in flight across the restart
            assert held.operation_id == "o0"
            limited.close()
            keyed.close()
        server.kill()

        server = DurableServer(data, "always", tmp_path / "server.log")
        with PurgatoryClient(f"127.0.0.1:{server.wait_port()}", purgatory=NAME, timeout=10) as c:
            groups = {g.name: g for g in c.list_groups()}
            assert groups["rl"].selection == rate and groups["ord"].selection == ordered
            assert (groups["rl"].ready, groups["ord"].leased, groups["ord"].ready) == (2, 1, 4)
            # A member with room joins: the group dispatches before the join answers, and
            # the window recorded before the kill is still full: nothing goes out.
            limited = c.join_group("rl")
            (group,) = [g for g in c.list_groups() if g.name == "rl"]
            assert (group.members, group.ready, group.leased) == (1, 2, 0), group
            assert time.time() * 1000 < before[0].lease_deadline_ms - VIS + WINDOW_MS
            limited.close()
            # The ordered key stays blocked by the lease recovered in flight, until acked.
            keyed = c.join_group("ord")
            (group,) = [g for g in c.list_groups() if g.name == "ord"]
            assert (group.leased, group.ready) == (1, 4), group
            c.ack("ord", held.sequence, attempt=held.attempt)
            d = next(keyed)
            assert (d.operation_id, d.attempt) == ("o1", 1)
            d.ack()
            keyed.close()
    finally:
        server.stop()
