"""Sessions under bursts and slow readers: flow control pushes back instead of cutting,
a Session that does not read holds the server to its bound, a named session resumes on a
new stream without re-registering anything, and the number of sessions is capped."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    Event,
    FailedPreconditionError,
    OperationSpec,
    OperationState,
    OutOfRangeError,
    ResourceExhaustedError,
)
from purgatory_server._service import Limits
from purgatory_server._service.api import session_outbound
from purgatory_server._service.api.session_messages import Ack
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.core.budget import ServerBudget

from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG, until

LONG = 600_000


def _config(limits: Limits, max_pending: int = 20_000) -> Any:
    settings = PurgatorySettings(name="default", max_pending=max_pending, retained_events=100)
    return replace(TEST_CONFIG, limits=limits, defaults=settings, purgatories=(settings,))


async def _next(events: Any, timeout: float = 10.0) -> Event:
    return await asyncio.wait_for(events.__anext__(), timeout)  # type: ignore[no-any-return]


async def test_a_burst_of_15000_watches_ending_together_registers_each_once(
    serve: ServeFn,
) -> None:
    # The burst that reproduced it: 15,000 watches due at the same instant through
    # watch_many(frame_size=500), consumed promptly, with the default session bound
    # (10,000). The stream used to be cut ("the client is not reading") and the re-sent
    # watches the count-based finished memory had forgotten registered again.
    _, port = await serve(config=_config(Limits()))
    n = 15_000
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=30) as client:
        opened: list[object] = []
        open_session = client.session

        def counting_session(**kwargs: Any) -> Any:
            session = open_session(**kwargs)
            opened.append(session)
            return session

        client.session = counting_session  # type: ignore[method-assign]
        due = int(time.time() * 1000) + 3000
        specs = [
            OperationSpec((f"k{i}",), 0, operation_id=f"b{i}", due_time_ms=due) for i in range(n)
        ]
        seen: set[str] = set()
        duplicates = 0
        async for event in client.watch_many(specs, frame_size=500):
            assert event.state is OperationState.EXPIRED
            duplicates += event.operation_id in seen
            seen.add(event.operation_id)
        info = await client.get_purgatory()
    assert (len(seen), duplicates) == (n, 0)
    assert info.last_sequence == n  # each registered (and ended) exactly once
    assert len(opened) == 1  # pushed back, never cut: one stream did it all


async def test_a_session_that_does_not_read_holds_the_server_to_its_bound(
    serve: ServeFn,
) -> None:
    # 60 KB watches that end at once, on a session whose client reads nothing: the
    # server stops reading its frames once about session_buffer_bytes wait to be sent,
    # instead of registering (and holding) everything the client writes.
    bound = 1 << 20
    limits = replace(Limits(), session_buffer_bytes=bound, max_payload_bytes=64 * 1024)
    _, port = await serve(config=_config(limits))
    payload = b"x" * 60_000
    frames, per_frame = 100, 4  # 24 MB of watches if nothing pushed back
    # A fixed 64 KB HTTP/2 window (no BDP probing): what the transport itself holds in
    # flight stays small and the count below measures the server's own bound.
    options = [("grpc.http2.bdp_probe", 0)]
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=30, options=options) as client:
        session = client.session(outcome_buffer=1)  # its reader stops after one outcome
        specs = [
            OperationSpec((f"s{i}",), 1, payload=payload, operation_id=f"s{i}")
            for i in range(frames * per_frame)
        ]
        chunks = [specs[i : i + per_frame] for i in range(0, len(specs), per_frame)]
        acks = await session.submit_all(chunks, lambda _: None)

        async def registered() -> int:
            return (await client.get_purgatory()).last_sequence

        await until(lambda: _positive(registered()))
        await asyncio.sleep(1.0)  # time enough to register everything, were it read
        held = await registered()
        # About bound / (ack status + outcome, ~120 KB each) watches, plus a frame and
        # what the transport holds: far below the 400 written.
        assert held <= 60, held  # (measured: 20-28)
        assert not session.finished  # pushed back, not cut
        # Reading again: flow control lets everything through, each outcome once.
        got = set()
        events = session.outcomes()
        while len(got) < len(specs):
            got.add((await _next(events)).operation_id)
        assert len(got) == len(specs)
        await until(lambda: _done(acks, frames))
        assert all(f.result().error is None for f in acks)
        await session.close()
    assert held < len(specs)


async def _positive(value: Any) -> bool:
    return bool(await value)


async def _done(acks: list[Any], count: int) -> bool:
    return len(acks) == count and all(f.done() for f in acks)


# A Session owing outcomes: 60 KB watches that end at once, on a stream whose client reads
# one outcome and stops (a fixed 64 KB HTTP/2 window: the transport holds little).
OWING_LIMITS = replace(Limits(), session_buffer_bytes=1 << 20, max_payload_bytes=64 * 1024)
OWING_OPTIONS = [("grpc.http2.bdp_probe", 0)]


@contextlib.asynccontextmanager
async def _owing_client(serve: ServeFn) -> AsyncIterator[tuple[AsyncPurgatoryClient, Any]]:
    """A server with OWING_LIMITS and a client of it; yields the client and the budget."""
    server, port = await serve(config=_config(OWING_LIMITS))
    target = f"127.0.0.1:{port}"
    async with AsyncPurgatoryClient(target, timeout=30, options=OWING_OPTIONS) as client:
        yield client, server.registry.budget


async def _owe_outcomes(client: AsyncPurgatoryClient, budget: Any, prefix: str) -> Any:
    """Open a session that reads one outcome, send it 40 big watches that end at once, and
    wait until they have ended and the budget holds what the session owes."""
    session = client.session(outcome_buffer=1)
    specs = [
        OperationSpec((f"{prefix}{i}",), 1, payload=b"x" * 60_000, operation_id=f"{prefix}{i}")
        for i in range(40)
    ]
    await session.submit_all([specs[i : i + 4] for i in range(0, 40, 4)], lambda _: None)

    async def owing() -> bool:
        info = await client.get_purgatory()
        return info.last_sequence >= 8 and info.pending == 0 and budget.held > 0

    await until(owing)
    return session


async def test_what_a_session_owes_is_charged_to_the_memory_budget(serve: ServeFn) -> None:
    # Outcomes a Session has not sent yet are held by the server as surely as pending
    # operations are: they count in the byte budget's held pool while they wait and are
    # given back when they are written or the stream ends. (They used to count nowhere:
    # an operation's charge was released as it ended, its outcome then waited uncharged.)
    async with _owing_client(serve) as (client, budget):
        session = await _owe_outcomes(client, budget, "c")
        await asyncio.sleep(0.5)  # the writer gets stuck on what the client does not read
        owed = budget.held
        # Several 60 KB outcomes (and their acknowledgements' statuses) wait to be sent,
        # and no operation is pending: all of it is what the session owes.
        assert owed >= 400_000, owed
        events = session.outcomes()
        for _ in range(40):  # reading: each written outcome gives its charge back
            await _next(events)
        await session.close()
    await until(_budget_released(budget))


async def test_a_session_whose_client_vanishes_gives_its_charge_back(serve: ServeFn) -> None:
    # The client goes away (its channel closed) while the server still owes it outcomes:
    # the handler is cancelled rather than ended, and the charge must come back all the
    # same, or the budget would shrink with every vanished client.
    async with _owing_client(serve) as (client, budget):
        await _owe_outcomes(client, budget, "v")
    # (the channel is closed here, the session never closed nor read)
    await until(_budget_released(budget))


def _budget_released(budget: Any) -> Any:
    async def released() -> bool:
        return bool(budget.held == 0)

    return released


async def test_a_named_session_resumes_without_re_registering(serve: ServeFn) -> None:
    _, port = await serve()
    specs = [OperationSpec((f"r{i}",), LONG, operation_id=f"r{i}") for i in range(6)]
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        first = client.session(session_id="resume-me")
        assert (await first.send(watches=specs)).error is None
        events = first.outcomes()
        await client.check_and_complete("r0")
        await client.check_and_complete("r1")
        assert [(await _next(events)).operation_id for _ in range(2)] == ["r0", "r1"]
        assert first.delivered == 2
        await first.close()  # the stream is gone; four watches still open
        await client.check_and_complete("r2")  # ends while no stream is open
        before = await client.get_purgatory()
        assert (before.pending, before.last_sequence) == (3, 3)

        # Resume after outcome 1, as if outcome 2 had been lost in transit.
        async def resumed() -> Any:
            while True:
                session = client.session(session_id="resume-me", resume_after=1)
                try:
                    await session.send(signals=["unrelated"])
                    return session
                except FailedPreconditionError:  # the server has not yet seen it end
                    await session.close()
                    await asyncio.sleep(0.02)

        second = await asyncio.wait_for(resumed(), 10)
        events = second.outcomes()
        # What it missed: outcome 2 again, then r2, which ended meanwhile.
        assert [(await _next(events)).operation_id for _ in range(2)] == ["r1", "r2"]
        await client.check_and_complete("r4")
        assert (await _next(events)).operation_id == "r4"  # a watch it took over
        assert second.delivered == 5  # the numbering goes on
        after = await client.get_purgatory()
        assert (after.pending, after.last_sequence) == (2, 4)  # nothing registered
        await second.close()


async def test_a_resume_point_the_server_no_longer_has_is_out_of_range(
    serve: ServeFn,
) -> None:
    limits = replace(TEST_CONFIG.limits, session_buffer=2)  # keeps 2 written outcomes
    _, port = await serve(config=_config(limits, max_pending=50))
    specs = [OperationSpec((f"o{i}",), LONG, operation_id=f"o{i}") for i in range(5)]
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        first = client.session(session_id="old")
        assert (await first.send(watches=specs)).error is None
        events = first.outcomes()
        for i in range(4):
            await client.check_and_complete(f"o{i}")
            await _next(events)
        await first.close()

        async def refused() -> None:
            while True:
                session = client.session(session_id="old", resume_after=0)
                try:
                    await session.send(signals=["x"])
                except FailedPreconditionError:
                    await session.close()
                    await asyncio.sleep(0.02)
                    continue
                finally:
                    await session.close()

        with pytest.raises(OutOfRangeError):
            await asyncio.wait_for(refused(), 10)


async def test_sessions_past_max_sessions_are_resource_exhausted(serve: ServeFn) -> None:
    _, port = await serve(
        config=replace(TEST_CONFIG, limits=replace(TEST_CONFIG.limits, max_sessions=2))
    )
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        a, b = client.session(), client.session()
        await a.send(signals=["k"])
        await b.send(signals=["k"])
        third = client.session()
        with pytest.raises(ResourceExhaustedError, match="max_sessions"):
            await third.send(signals=["k"])
        await a.close()

        async def fourth_opens() -> bool:
            session = client.session()
            try:
                await session.send(signals=["k"])
                return True
            except ResourceExhaustedError:
                return False
            finally:
                await session.close()

        await until(fourth_opens)  # a closed session frees its place
        await b.close()
        await third.close()


async def test_watch_many_resumes_a_cut_session_without_re_sending(
    serve: ServeFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A caller that stops taking outcomes (watch_many's buffer of 1 fills, its stream is
    # not read) while three waves of 60 KB outcomes end on a 64 KB bound: the second
    # wave leaves the server's writer stuck, the third finds it stuck for over 0.5 s (5 s
    # in production) and the stream is cut. watch_many resumes the session and gets every
    # outcome without sending a watch again.
    monkeypatch.setattr(session_outbound, "STALLED_S", 0.5)
    limits = replace(Limits(), session_buffer_bytes=64 * 1024, max_payload_bytes=64 * 1024)
    _, port = await serve(config=_config(limits))
    waves = [300] * 10 + [1000] * 5 + [2000] * 5  # timeouts (ms)
    specs = [
        OperationSpec((f"c{i}",), ms, payload=b"x" * 60_000, operation_id=f"c{i}")
        for i, ms in enumerate(waves)
    ]
    options = [("grpc.http2.bdp_probe", 0)]  # a small window: a full client is felt
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, options=options) as client:
        opened: list[dict[str, Any]] = []
        frames_sent: list[int] = []
        open_session = client.session

        def spying_session(**kwargs: Any) -> Any:
            session = open_session(**kwargs)
            opened.append(kwargs)
            submit_all = session.submit_all

            async def counting(frames: Any, on_ack: Any) -> Any:
                frames = list(frames)
                frames_sent.append(sum(len(f) for f in frames))
                return await submit_all(frames, on_ack)

            session.submit_all = counting
            return session

        client.session = spying_session  # type: ignore[method-assign]
        events = client.watch_many(specs, frame_size=20, buffer=1)
        seen = [(await _next(events)).operation_id]
        await asyncio.sleep(2.8)  # not reading while the three waves end
        seen += [event.operation_id async for event in events]
        info = await client.get_purgatory()
    assert sorted(seen) == sorted(s.operation_id for s in specs)
    assert len(opened) >= 2  # cut at least once
    resumed = [kw["resume_after"] is not None for kw in opened]
    assert resumed == [False] + [True] * (len(opened) - 1)
    assert frames_sent == [20] + [0] * (len(opened) - 1)  # resumed, nothing re-sent
    assert info.last_sequence == 20


async def test_a_cut_stream_says_what_was_delivered(
    serve: ServeFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_outbound, "STALLED_S", 0.5)
    limits = replace(Limits(), session_buffer_bytes=64 * 1024, max_payload_bytes=64 * 1024)
    _, port = await serve(config=_config(limits))
    big = [
        OperationSpec((f"g{i}",), 300, payload=b"x" * 60_000, operation_id=f"g{i}")
        for i in range(20)
    ]
    # The late ones are as large: the stream is cut only past twice the byte bound, and
    # how much of the twenty is still queued when the writer gets stuck depends on how
    # they were split into messages (ended in one reaper turn or several: as little as
    # two, 120 KB, under the 128 KB), so each late outcome must add to it.
    late = [
        OperationSpec((f"late{i}",), LONG, payload=b"y" * 60_000, operation_id=f"late{i}")
        for i in range(8)
    ]
    options = [("grpc.http2.bdp_probe", 0)]
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, options=options) as client:
        session = client.session(session_id="cut", outcome_buffer=1)  # reads one, stops
        assert (await session.send(watches=[*big, *late])).error is None
        await asyncio.sleep(1.0)  # the twenty end; the server's writer gets stuck
        # One more outcome at a time: the first to find the writer stuck for STALLED_S
        # cuts the stream (on a loaded machine the writer may take longer to get stuck).
        for i in range(len(late)):
            await client.check_and_complete(f"late{i}")
            await asyncio.sleep(0.6)
        events = session.outcomes()
        with pytest.raises(ResourceExhaustedError) as cut:
            while True:
                await _next(events)
        # Exactly what it wrote (this client read all of it before the status).
        assert cut.value.metadata["purgatory-session-delivered"] == str(session.delivered)
        assert 0 < session.delivered < 20 + len(late)
        await session.close()


async def test_watch_many_holds_at_most_its_buffer(serve: ServeFn) -> None:
    # 50 outcomes at once and a caller that takes one, then pauses: the client keeps at
    # most `buffer` of them, reads no further (the server is pushed back), and reading
    # again gets the rest.
    _, port = await serve(config=_config(Limits(), max_pending=100))
    specs = [OperationSpec((f"w{i}",), 200, operation_id=f"w{i}") for i in range(50)]
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        sessions: list[Any] = []
        open_session = client.session

        def spying_session(**kwargs: Any) -> Any:
            sessions.append(open_session(**kwargs))
            return sessions[-1]

        client.session = spying_session  # type: ignore[method-assign]
        events = client.watch_many(specs, buffer=2)
        first = await _next(events)
        await until(lambda: _all_ended(client, 50))
        await asyncio.sleep(0.3)  # time enough to read all 50, were it unbounded
        assert sessions[0].delivered < 50  # the reader waits for room
        rest = [event.operation_id async for event in events]
    assert sorted([first.operation_id, *rest]) == sorted(s.operation_id for s in specs)


async def _all_ended(client: AsyncPurgatoryClient, count: int) -> bool:
    return (await client.get_purgatory()).last_sequence == count


async def test_a_session_past_the_memory_budget_is_cut_and_gives_its_charge_back(
    serve: ServeFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Session that does not read, under a budget far below its own byte bound (64 MiB):
    # what it owes fills the held pool (charged, never refused); once its writer has been
    # stuck for STALLED_S (0.5 s here) with the pool still full the stream is cut with
    # RESOURCE_EXHAUSTED and its charge given back. Before, it kept the pool full (every
    # registration refused) for as long as it stayed open.
    monkeypatch.setattr(session_outbound, "STALLED_S", 0.5)
    limits = replace(Limits(), memory_budget_bytes=16 << 20, max_payload_bytes=64 * 1024)
    server, port = await serve(config=_config(limits))
    budget = server.registry.budget
    cut_before = server.registry.sessions.cut_off
    share, whole = session_outbound.POOL_FULL

    async def pool_full() -> bool:
        return bool(budget.held * whole >= budget.held_capacity * share)

    options = [("grpc.http2.bdp_probe", 0)]
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=30, options=options) as client:
        session = client.session(session_id="over", outcome_buffer=1)  # reads one, stops
        # Big frames, each read in full before the next (no write left pending when the
        # stream is cut), until what the session owes fills the pool.
        for n in range(0, 560, 56):
            if await pool_full():
                break
            specs = [
                OperationSpec((f"b{n + i}",), 1, payload=b"x" * 60_000, operation_id=f"b{n + i}")
                for i in range(56)
            ]
            await session.submit(watches=specs)

            async def ended() -> bool:
                return (await client.get_purgatory()).pending == 0

            await until(ended)
        await until(pool_full)
        await until(_budget_released(budget), 10.0)  # cut while nobody reads: given back
        assert server.registry.sessions.cut_off == cut_before + 1
        events = session.outcomes()
        with pytest.raises(ResourceExhaustedError, match="memory budget is full") as cut:
            while True:
                await _next(events)
        assert cut.value.metadata["purgatory-session-delivered"] == str(session.delivered)
        await session.close()


async def test_a_session_holding_a_charge_pauses_while_the_pool_is_full() -> None:
    # The reader's side of the same rule: a stream that owes something while the held
    # pool is full stops taking frames (full), and takes them again once it owes nothing.
    loop = asyncio.get_running_loop()
    limits = replace(Limits(), memory_budget_bytes=1 << 20)
    budget = ServerBudget(limits)
    outbound = session_outbound.SessionOutbound(limits, loop, budget=budget)
    assert not outbound.full()
    budget.held = budget.held_capacity  # everything else holds the pool
    assert not outbound.full()  # owing nothing: a pool others fill does not pause it
    ack = Ack(1)
    outbound.queue_ack(ack)  # owes its acknowledgement: charged
    assert budget.held > budget.held_capacity
    assert outbound.full()
    outbound.end(None)  # (written or dropped: its charge comes back)
    assert budget.held == budget.held_capacity
    assert not outbound.full()
