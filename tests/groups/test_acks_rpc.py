"""Nack, AckBatch and a group's retry backoff over the wire (one real server for the
module): both Python clients, the semantics at the edges (docs/service.md "Worker
groups"), and the INVALID_ARGUMENT of each field."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from purgatory_client import (
    AckEntry,
    AsyncPurgatoryClient,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PurgatoryClient,
    RetryBackoff,
)

from tests.service.helpers import ServerThread

NOT_FOUND, FAILED_PRECONDITION = 5, 9


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread() as st:
        yield st


@pytest.fixture
def client(server: ServerThread) -> Iterator[PurgatoryClient]:
    with PurgatoryClient(server.target, timeout=10) as c:
        yield c


def _publish(client: PurgatoryClient, *ids: str) -> None:
    for op_id in ids:
        client.force_complete(
            client.try_complete_else_watch([], 60_000, operation_id=op_id, wait=False).operation_id
        )


def test_nack_redelivers_after_its_delay_or_the_backoff_and_stays_fenced(
    client: PurgatoryClient,
) -> None:
    backoff = RetryBackoff("fixed", 200)
    stream = client.join_group("nacks", visibility_timeout_ms=60_000, backoff=backoff)
    try:
        _publish(client, "n-1")
        first = next(stream)
        assert first.attempt == 1
        now = first.nack(0)  # at once
        assert not now.dead_letter and now.redeliver_at_ms <= time.time() * 1000 + 50
        second = next(stream)
        assert (second.sequence, second.attempt) == (first.sequence, 2)
        with pytest.raises(FailedPreconditionError, match="lease lost"):
            first.nack()  # fenced: attempt 1 lost the lease
        later = second.nack()  # the group's backoff: 200 ms
        nacked_ms = time.time() * 1000
        assert later.redeliver_at_ms >= nacked_ms + 200 - 50
        third = next(stream)
        assert time.time() * 1000 >= later.redeliver_at_ms - 20  # the same host's clock
        assert third.attempt == 3
        # A long delay: the outcome waits, counted as retrying.
        third.nack(60_000)
        (group,) = [g for g in client.list_groups() if g.name == "nacks"]
        assert (group.retrying, group.leased, group.backoff) == (
            1,
            0,
            RetryBackoff("fixed", 200, 12 * 3600 * 1000),
        )
        # An operator rejects it for good; a nack of the dead letter changes nothing.
        assert client.nack("nacks", first.sequence, dead_letter=True).dead_letter
        again = client.nack("nacks", first.sequence, attempt=3)
        assert (again.dead_letter, again.redeliver_at_ms) == (True, 0)
        (dead,) = client.list_dead_letters("nacks").dead_letters
        assert (dead.sequence, dead.attempt) == (first.sequence, 3)
        client.ack("nacks", first.sequence)  # discarded
        with pytest.raises(NotFoundError):
            client.nack("nacks", first.sequence)
    finally:
        stream.close()


async def test_ack_batch_answers_each_entry(server: ServerThread) -> None:
    async with AsyncPurgatoryClient(server.target, timeout=10) as client:
        stream = await client.join_group("batch", visibility_timeout_ms=60_000)
        try:
            for op_id in ("b-1", "b-2", "b-3", "b-4"):
                await client.force_complete(
                    (
                        await client.try_complete_else_watch(
                            [], 60_000, operation_id=op_id, wait=False
                        )
                    ).operation_id
                )
            got = [await stream.__anext__() for _ in range(4)]
            one, two, three, four = sorted(got, key=lambda d: d.sequence)
            await two.nack(0)
            two_again = await stream.__anext__()
            assert two_again.attempt == 2
            results = await client.ack_batch(
                "batch",
                [
                    AckEntry(one.sequence, one.attempt),
                    AckEntry(two.sequence, two.attempt),  # stale: attempt 2 holds it
                    AckEntry(10**9),  # never taken in
                    AckEntry(three.sequence, three.attempt, nack=True, delay_ms=60_000),
                    four.sequence,  # a bare sequence: an unfenced ack
                    AckEntry(one.sequence, one.attempt),  # acked above
                ],
            )
            assert [(r.sequence, r.code) for r in results] == [
                (one.sequence, 0),
                (two.sequence, FAILED_PRECONDITION),
                (10**9, NOT_FOUND),
                (three.sequence, 0),
                (four.sequence, 0),
                (one.sequence, NOT_FOUND),
            ]
            assert results[0].ok and not results[1].ok and "lease lost" in results[1].message
            assert results[3].redeliver_at_ms > time.time() * 1000 + 50_000
            (group,) = [g for g in await client.list_groups() if g.name == "batch"]
            # two is still leased as attempt 2, three waits, one and four are gone.
            assert (group.leased, group.retrying, group.ready, group.dead_letters) == (1, 1, 0, 0)
        finally:
            await stream.aclose()


def test_each_field_is_checked(client: PurgatoryClient) -> None:
    def field(call) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(InvalidArgumentError) as info:
            call()
        return info.value.field_violations[0][0]

    assert field(lambda: client.nack("g", 1, delay_ms=5, dead_letter=True)) == "delay_ms"
    assert field(lambda: client.nack("g", 1, delay_ms=12 * 3600 * 1000 + 1)) == "delay_ms"
    assert field(lambda: client.nack("g", 0)) == "sequence"
    assert field(lambda: client.ack_batch("g", [])) == "entries"
    assert field(lambda: client.ack_batch("g", [1, AckEntry(2, delay_ms=1)])) == "entries[1].nack"
    assert field(lambda: client.ack_batch("g", [AckEntry(0, nack=True)])) == "entries[0].sequence"
    for bad, name in (
        (RetryBackoff("fixed", 0), "backoff.delay_ms"),
        (RetryBackoff("fixed", 100, max_delay_ms=50), "backoff.max_delay_ms"),
        (RetryBackoff("exponential", 100, jitter=1.5), "backoff.jitter"),
    ):
        assert field(lambda: client.join_group("checked", backoff=bad)) == name  # noqa: B023
    client.join_group("checked", backoff=RetryBackoff("exponential", 100)).close()
    with pytest.raises(FailedPreconditionError, match="backoff"):
        client.join_group("checked", backoff=RetryBackoff("exponential", 101))
    client.join_group("checked").close()  # unset: the group's
    client.delete_group("checked")


def test_cli_nack_batch_ack_and_backoff(
    server: ServerThread, client: PurgatoryClient, capsys: pytest.CaptureFixture[str]
) -> None:
    from purgatory_client.cli import main

    from tests.groups.test_cli import _run

    t = ("--target", server.target)
    joined = ("subscribe", "--group", "cli", "--visibility-timeout-ms", "60000", "--limit", "2")
    backoff = ("--backoff", "exponential", "--backoff-delay-ms")
    client.join_group(
        "cli", visibility_timeout_ms=60_000, backoff=RetryBackoff("exponential", 50)
    ).close()
    _publish(client, "c-1", "c-2")
    assert main([*t, *joined, *backoff, "60"]) == 1  # not the group's backoff
    assert "backoff" in capsys.readouterr().err
    code, out = _run(capsys, *t, *joined, *backoff, "50")
    assert code == 0 and [d["attempt"] for d in out] == [1, 1]
    first, second = (d["sequence"] for d in out)
    code, nacked = _run(capsys, *t, "nack", "cli", str(first), "--attempt", "1", "--delay-ms", "0")
    assert code == 0 and nacked[0]["nacked"] == first and not nacked[0]["dead_letter"]
    code, listed = _run(capsys, *t, "group", "list")
    (group,) = [g for g in listed if g["name"] == "cli"]
    assert group["backoff"]["type"] == "exponential" and group["backoff"]["delay_ms"] == 50
    code, out = _run(capsys, *t, *joined[:-1], "1")
    assert code == 0 and [(d["sequence"], d["attempt"]) for d in out] == [(first, 2)]
    # One call, each entry answered: first:1 is stale (attempt 2 holds it).
    code, out = _run(capsys, *t, "ack", "cli", f"{first}:1", f"{second}:1", f"{first}:2")
    assert code == 1
    assert [(o.get("acked"), o.get("code")) for o in out] == [
        (None, FAILED_PRECONDITION),
        (second, None),
        (first, None),
    ]
    assert main([*t, "nack", "cli", str(first), "--dead-letter"]) == 1  # acked already
    assert "NOT_FOUND" in capsys.readouterr().err


def test_a_lapsed_lease_waits_out_the_backoff_and_the_next_attempt_is_fenced(
    client: PurgatoryClient,
) -> None:
    stream = client.join_group(
        "lapses", visibility_timeout_ms=100, backoff=RetryBackoff("fixed", 300)
    )
    try:
        _publish(client, "l-1")
        first = next(stream)  # never acked: its lease lapses after 100 ms
        second = next(stream)
        # Not before the lease's end plus the backoff (the server's and this host's clock).
        assert time.time() * 1000 >= first.lease_deadline_ms + 300 - 20
        assert (second.sequence, second.attempt) == (first.sequence, 2)
        with pytest.raises(FailedPreconditionError, match="lease lost"):
            first.ack()
        second.ack()
    finally:
        stream.close()
