"""Nacks and retry backoff of a durable purgatory: the ``group_retry`` replay rule, the
backoff in the group's state, compaction carrying both, a restore of a lease that lapsed
while the server was down, and a kill -9 mid-backoff (the wait is kept, the next attempt
number still goes on)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from purgatory_client import PurgatoryClient, RetryBackoff
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server import MockTime
from purgatory_server._journal import Journal, JournalState
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.groups.backoff import BackoffType
from purgatory_server._service.groups.backoff import RetryBackoff as ServerBackoff
from purgatory_server._service.groups.entry import EntryState, GroupEntry
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.records import RestoredGroup, backoff_from_state

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME
from tests.groups.test_journal_groups import SMALL, created, delivered
from tests.groups.test_leases import LIMITS, end, step, taken
from tests.journal.helpers import out


def retried(sequence: int, attempt: int, at: int) -> JournalRecord:
    return JournalRecord(
        group_retry=JournalRecord.GroupRetry(
            purgatory="p", group="g", sequence=sequence, attempt=attempt, retry_at_wall_ms=at
        )
    )


def test_replay_and_compaction_keep_waits_and_the_backoff(tmp_path: Path) -> None:
    state = JournalState(retain_events=100)
    with_backoff = created("g")
    with_backoff.group_state.backoff_type = 2
    with_backoff.group_state.backoff_delay_ms = 100
    with_backoff.group_state.backoff_max_delay_ms = 5_000
    with_backoff.group_state.backoff_jitter = 0.5
    records = [
        with_backoff,
        out("a", 1),
        out("b", 2),
        delivered("g", 1, 1, 1_000),
        retried(1, 1, 7_000),  # a nack: lease over, waits until 7 s
        delivered("g", 2, 1, 1_000),
        retried(2, 1, 3_000),
        delivered("g", 2, 2, 9_000),  # offered again and leased: the wait is over
    ]
    for i, record in enumerate(records):
        state.apply(i, record)
    entries = state.snapshot(len(records)).groups["g"].entries
    assert [(e.attempts, e.lease_deadline_wall_ms, e.retry_at_wall_ms) for e in entries] == [
        (1, 0, 7_000),
        (2, 9_000, 0),
    ]
    with Journal.open(tmp_path, SMALL) as journal:
        journal.append_sync(records)
        journal.compact()
    with Journal.open(tmp_path, SMALL) as journal:
        (group,) = journal.recovered.groups.values()
        assert [e.retry_at_wall_ms for e in group.entries] == [7_000, 0]
        assert backoff_from_state(group.state) == ServerBackoff(
            BackoffType.EXPONENTIAL, 100, 5_000, 0.5
        )


async def test_a_lease_that_lapsed_while_down_waits_out_the_backoff() -> None:
    """No wait was recorded (the server was down when the lease ran out): the restore
    applies the backoff without jitter from the lease's deadline."""
    clock = MockTime()
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=100)
    p = NamedPurgatory(
        settings, LIMITS, asyncio.get_running_loop(), time=clock, reaper_enabled=False
    )
    try:
        source, _ = p.groups.join("source", 0, 0, 0)  # holds the outcomes to restore
        end(p, "o1", "o2")
        outcomes = [e.outcome for e in source.entries()]
        now = clock.wall_clock_ms()
        lapsed, waiting = GroupEntry(outcomes[0], attempts=2), GroupEntry(outcomes[1], attempts=1)
        lapsed.lease_deadline_ms = now - 100
        waiting.retry_at_ms = now + 50
        backoff = ServerBackoff(BackoffType.EXPONENTIAL, 100, jitter=0.9)
        p.groups.restore(
            {"g": RestoredGroup(GroupConfig(1_000, 5, backoff=backoff), 2, [lapsed, waiting])}
        )
        group, member = p.groups.join("g", 0, 0, 16)
        assert group.tally()[EntryState.WAITING] == 2
        step(p, clock, 50)
        assert [(d.outcome.sequence, d.attempt) for d in taken(member)] == [(2, 2)]
        step(p, clock, 49)  # the lapsed lease's 2nd failure: 200 ms from its deadline
        assert taken(member) == []
        step(p, clock, 1)
        assert [(d.outcome.sequence, d.attempt) for d in taken(member)] == [(1, 3)]
    finally:
        p.shutdown_engine()


def _until(predicate, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


BACKOFF = RetryBackoff("fixed", 2_500)


def test_waits_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    server = DurableServer(data, "always", tmp_path / "server.log")
    try:
        with PurgatoryClient(f"127.0.0.1:{server.wait_port()}", purgatory=NAME, timeout=10) as c:
            stream = c.join_group("retry", visibility_timeout_ms=60_000, backoff=BACKOFF)
            for i in (1, 2, 3):
                c.try_complete_else_watch([], 10, operation_id=f"job-{i}")
            held = {d.operation_id: d for d in (next(stream), next(stream), next(stream))}
            stream.close()
            long_wait = held["job-1"].nack(120_000)
            backoff_wait = held["job-2"].nack()  # the group's backoff: 2.5 s
            assert held["job-3"].nack(dead_letter=True).dead_letter
        server.kill()  # mid-backoff

        server = DurableServer(data, "always", tmp_path / "server.log")
        with PurgatoryClient(f"127.0.0.1:{server.wait_port()}", purgatory=NAME, timeout=10) as c:
            (group,) = c.list_groups()
            assert group.backoff == RetryBackoff("fixed", 2_500, 12 * 3600 * 1000)
            assert (group.leased, group.dead_letters, group.retrying + group.ready) == (0, 1, 2)
            member = c.join_group("retry")
            d = next(member)
            # Not before its recorded wait ended, and as the next attempt (fencing).
            assert time.time() * 1000 >= backoff_wait.redeliver_at_ms - 50
            assert (d.operation_id, d.attempt) == ("job-2", 2)
            d.ack()
            # job-1 still waits out its 120 s; its holder's late nack of attempt 1 counts.
            _until(lambda: c.list_groups()[0].retrying == 1)
            assert long_wait.redeliver_at_ms > time.time() * 1000 + 60_000
            c.nack("retry", held["job-1"].sequence, attempt=1, delay_ms=0)
            d = next(member)
            assert (d.operation_id, d.attempt) == ("job-1", 2)
            d.ack()
            (dead,) = c.list_dead_letters("retry").dead_letters
            assert (dead.operation_id, dead.attempt) == ("job-3", 1)
            member.close()
    finally:
        server.stop()
