"""Delivery selection of worker groups on MockTime: priorities, ordering keys, rate
limits, and their edges (priority with ordering keys, a dead head, a redriven one, a
per-key limit), with explicit clock steps.

A real NamedPurgatory as in test_leases (timer, inbox, publish path, reaper off).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server import MockTime
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.groups import GroupMember, WorkerGroup
from purgatory_server._service.groups.member import Delivery
from purgatory_server._service.groups.ordering import KeySource
from purgatory_server._service.groups.priority import PriorityRule
from purgatory_server._service.groups.rate_limit import RateLimit, RateLimiter
from purgatory_server._service.groups.selection import (
    Selection,
    selection_from_bytes,
    selection_from_proto,
    selection_to_proto,
)
from purgatory_server._service.model.errors import FailedPrecondition, InvalidArgument
from purgatory_server._service.wire.validation import operation_request

LIMITS = Limits(max_groups=4, max_group_backlog=100)
VISIBILITY = 1_000
URGENT = PriorityRule("urgent/", "", 10)


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
async def purgatory(clock: MockTime) -> AsyncIterator[NamedPurgatory]:
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=200)
    loop = asyncio.get_running_loop()
    p = NamedPurgatory(settings, LIMITS, loop, time=clock, reaper_enabled=False)
    yield p
    p.shutdown_engine()


def end(p: NamedPurgatory, *ops: str | tuple[str, str]) -> None:
    """Each op (an id, or (id, key)) becomes one published outcome, in the order given."""
    reqs = []
    for op in ops:
        op_id, keys = (op, []) if isinstance(op, str) else (op[0], [op[1]])
        msg = pb.TryCompleteElseWatchRequest(operation_id=op_id, keys=keys, timeout_ms=60_000)
        reqs.append(operation_request("", msg, LIMITS))
    p.register(reqs, [""] * len(reqs))
    for op in ops:
        p.force_complete(op if isinstance(op, str) else op[0])


def taken(member: GroupMember) -> list[Delivery]:
    out = list(member._queue)
    member._queue.clear()
    return out


def ids(deliveries: list[Delivery]) -> list[str]:
    return [d.outcome.operation_id for d in deliveries]


def step(p: NamedPurgatory, clock: MockTime, ms: int) -> None:
    clock.sleep(ms)
    p.advance_clock(0)


def join(
    p: NamedPurgatory, selection: Selection, prefetch: int = 16, attempts: int = 3
) -> tuple[WorkerGroup, GroupMember]:
    return p.groups.join("workers", VISIBILITY, attempts, prefetch, selection=selection)


def ack_all(group: WorkerGroup, deliveries: list[Delivery]) -> None:
    for d in deliveries:
        group.ack(d.outcome.sequence, d.attempt)


async def test_an_urgent_outcome_overtakes_the_routine_backlog(purgatory: NamedPurgatory) -> None:
    group, member = join(purgatory, Selection(priorities=(URGENT,)), prefetch=1)
    end(purgatory, *(f"routine/{i}" for i in range(50)), "urgent/1")
    first = taken(member)
    # routine/0 went out at once (the member had room); the urgent one is next.
    assert ids(first) == ["routine/0"]
    ack_all(group, first)
    (urgent,) = taken(member)
    assert (urgent.outcome.operation_id, urgent.priority) == ("urgent/1", 10)
    ack_all(group, [urgent])
    # Equal priorities: sequence order.
    order = []
    while delivered := taken(member):
        order += ids(delivered)
        ack_all(group, delivered)
    assert order == [f"routine/{i}" for i in range(1, 50)]


async def test_a_key_rule_and_the_first_matching_rule_wins(purgatory: NamedPurgatory) -> None:
    rules = (PriorityRule("", "vip", 5), PriorityRule("bulk/", "", 1), URGENT)
    group, member = join(purgatory, Selection(priorities=rules), prefetch=1)
    group.leave(member)  # everything waits in the group, then one member takes it
    end(purgatory, "bulk/1", "plain", ("bulk/2", "vip"), "urgent/1")
    _, member = join(purgatory, Selection(priorities=rules), prefetch=1)
    order = []
    while delivered := taken(member):
        order += [(d.outcome.operation_id, d.priority) for d in delivered]
        ack_all(group, delivered)
    assert order == [("urgent/1", 10), ("bulk/2", 5), ("bulk/1", 1), ("plain", 0)]


async def test_one_key_in_flight_at_a_time_other_keys_in_parallel(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, member = join(purgatory, Selection(ordering=KeySource("/")), attempts=2)
    end(purgatory, "o1/a", "o1/b", "o2/a", "o1/c", "loose")
    first = taken(member)
    # Each key's head, and the outcome without a key; o1/b and o1/c wait behind o1/a.
    assert ids(first) == ["o1/a", "o2/a", "loose"]
    assert [d.ordering_key for d in first] == ["o1", "o2", ""]
    ack_all(group, first[1:])
    assert taken(member) == []
    # o1/a's lease runs out: it comes back before o1/b (still the key's head) ...
    step(purgatory, clock, VISIBILITY)
    assert [(d.outcome.operation_id, d.attempt) for d in taken(member)] == [("o1/a", 2)]
    # ... and once it is dead (max_attempts 2) the key moves on.
    step(purgatory, clock, VISIBILITY)
    assert ids(taken(member)) == ["o1/b"]
    assert group.counts() == (1, 1, 1)  # o1/c ready (blocked), o1/b leased, o1/a dead


async def test_a_redriven_head_goes_first_once_the_key_is_free(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, member = join(purgatory, Selection(ordering=KeySource()), attempts=1)
    end(purgatory, ("a1", "k"), ("a2", "k"), ("a3", "k"))
    (a1,) = taken(member)
    step(purgatory, clock, VISIBILITY)  # a1 dead after its one attempt
    (a2,) = taken(member)
    assert group.redrive(None) == [a1.outcome.sequence]
    assert taken(member) == []  # a2 is in flight: a1 waits for it
    ack_all(group, [a2])
    assert [(d.outcome.operation_id, d.attempt) for d in taken(member)] == [("a1", 2)]


async def test_priority_decides_between_keys_sequence_within_one(
    purgatory: NamedPurgatory,
) -> None:
    selection = Selection(priorities=(URGENT,), ordering=KeySource())
    group, member = join(purgatory, selection, prefetch=1)
    group.leave(member)
    end(purgatory, ("r1", "k1"), ("urgent/1", "k1"), ("urgent/2", "k2"), ("r2", "k3"))
    _, member = join(purgatory, selection, prefetch=1)
    order = []
    while delivered := taken(member):
        order += ids(delivered)
        ack_all(group, delivered)
    # urgent/1 outranks everything but waits behind r1, its key's older outcome.
    assert order == ["urgent/2", "r1", "urgent/1", "r2"]


async def test_rate_limit_bounds_deliveries_per_window(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    group, member = join(purgatory, Selection(rate_limit=RateLimit(3, 1_000)))
    end(purgatory, *(f"o{i}" for i in range(7)))
    first = taken(member)
    assert ids(first) == ["o0", "o1", "o2"]
    ack_all(group, first)  # acks free no window place: the window counts deliveries
    step(purgatory, clock, 999)
    assert taken(member) == []
    step(purgatory, clock, 1)
    second = taken(member)
    assert ids(second) == ["o3", "o4", "o5"]
    ack_all(group, second)
    step(purgatory, clock, 1_000)
    assert ids(taken(member)) == ["o6"]


async def test_a_redelivery_counts_against_the_window(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    _group, member = join(purgatory, Selection(rate_limit=RateLimit(1, 5_000)))
    end(purgatory, "o1", "o2")
    assert ids(taken(member)) == ["o1"]
    step(purgatory, clock, VISIBILITY)  # o1's lease runs out inside the window
    assert taken(member) == []
    step(purgatory, clock, 5_000 - VISIBILITY)
    assert [(d.outcome.operation_id, d.attempt) for d in taken(member)] == [("o1", 2)]


async def test_per_key_rate_limit(purgatory: NamedPurgatory, clock: MockTime) -> None:
    limit = RateLimit(1, 500, KeySource())
    group, member = join(purgatory, Selection(rate_limit=limit))
    end(purgatory, ("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b"), "n1", "n2")
    first = taken(member)
    # One per key at once; outcomes without a key share one window.
    assert ids(first) == ["a1", "b1", "n1"]
    ack_all(group, first)
    step(purgatory, clock, 499)
    assert taken(member) == []
    step(purgatory, clock, 1)
    assert sorted(ids(taken(member))) == ["a2", "b2", "n2"]


async def test_settings_are_fixed_and_spelled_both_ways(purgatory: NamedPurgatory) -> None:
    selection = Selection((URGENT,), KeySource("/"), RateLimit(5, 100, KeySource()))
    join(purgatory, selection)
    assert selection_from_bytes(selection_to_proto(selection).SerializeToString()) == selection
    purgatory.groups.join("workers", 0, 0, 1)  # unset: the group's
    with pytest.raises(FailedPrecondition, match="another selection"):
        join(purgatory, Selection(priorities=(URGENT,)))


@pytest.mark.parametrize(
    ("selection", "field"),
    [
        (pb.GroupSelection(priorities=[pb.GroupPriority(priority=1)]), "selection.priorities[0]"),
        (
            pb.GroupSelection(priorities=[pb.GroupPriority(key="k", priority=1_000_001)]),
            "selection.priorities[0].priority",
        ),
        (
            pb.GroupSelection(ordering_key=pb.GroupKeySource(operation_id_separator="x" * 17)),
            "selection.ordering_key.operation_id_separator",
        ),
        (pb.GroupSelection(ordering_key=pb.GroupKeySource()), "selection.ordering_key"),
        (pb.GroupSelection(rate_limit=pb.GroupRateLimit(window_ms=10)), "selection.rate_limit.max"),
        (
            pb.GroupSelection(rate_limit=pb.GroupRateLimit(max=1, window_ms=3_600_001)),
            "selection.rate_limit.window_ms",
        ),
    ],
)
def test_invalid_settings_name_their_field(selection: pb.GroupSelection, field: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        selection_from_proto(selection, 256)
    assert raised.value.field == field


def test_a_per_key_limit_tracks_at_most_max_keys() -> None:
    """Past ``max_keys`` windows a new key waits until one empties: memory is bounded and
    the per-key bound is never broken to make room."""
    limiter = RateLimiter(RateLimit(2, 100, KeySource()), max_keys=2)
    limiter.record("a", 1_000)
    limiter.record("b", 1_050)
    assert limiter.free_at("c", 1_060) == 1_100  # a's window empties first
    assert limiter.free_at("c", 1_100) == 0
    limiter.record("c", 1_100)
    assert limiter.free_at("a", 1_100) == 1_150  # a is gone now: b empties next
    assert [key for key, _ in limiter.windows(1_100)] == ["b", "c"]


# ------------------------------------------------------------------ a model check
MODEL_ATTEMPTS = 2


class _Model:
    """What a group with priorities and ordering keys owes, and the checks on what it
    delivers (see the test below)."""

    def __init__(self, ops: list[tuple[str | None, bool]]) -> None:
        # sequence -> (ordering key, priority): outcome i is sequence i + 1
        self.info = {i + 1: (key, 10 if urgent else 0) for i, (key, urgent) in enumerate(ops)}
        self.owed = set(self.info)  # delivered next or in flight: not acked, not dead
        self.held: dict[int, Delivery] = {}
        self.dead: set[int] = set()
        self.spent = dict.fromkeys(self.info, 0)  # deliveries since intake or redrive

    def eligible(self) -> list[tuple[int, int]]:
        """(-priority, sequence) of what may go next: keyless outcomes and the oldest owed
        outcome of each key with nothing in flight, best first."""
        info = self.info
        busy = {info[s][0] for s in self.held} - {None}
        seen: set[str] = set()
        out = []
        for s in sorted(self.owed - set(self.held)):
            key = info[s][0]
            if key is None or (key not in busy and key not in seen):
                out.append((-info[s][1], s))
            if key is not None:
                seen.add(key)
        return sorted(out)

    def receive(self, deliveries: list[Delivery], check_best: bool) -> None:
        info = self.info
        for d in deliveries:
            seq = d.outcome.sequence
            key = info[seq][0]
            assert d.ordering_key == (key or "")
            if check_best:
                assert (-info[seq][1], seq) == self.eligible()[0], "not the best eligible"
            if key is not None:
                assert all(info[s][0] != key for s in self.held), "two of a key in flight"
                assert seq == min(s for s in self.owed if info[s][0] == key), "out of order"
            self.held[seq] = d
            self.spent[seq] += 1

    def expired(self) -> None:
        """Every lease held ran out: back to owed, or dead once out of attempts."""
        for seq in self.held:
            if self.spent[seq] >= MODEL_ATTEMPTS:
                self.owed.discard(seq)
                self.dead.add(seq)
        self.held.clear()

    def redrive(self, group: WorkerGroup) -> None:
        assert sorted(group.redrive(None)) == sorted(self.dead)
        for seq in self.dead:
            self.spent[seq] = 0
        self.owed |= self.dead
        self.dead.clear()

    def ack(self, group: WorkerGroup, seq: int) -> None:
        group.ack(seq, self.held.pop(seq).attempt)
        self.owed.discard(seq)


def _run_model(ops: list[tuple[str | None, bool]], actions: list[str], prefetch: int) -> None:
    """Outcomes with random keys and priorities, then acks and lease expiries at random:
    every delivery is its key's oldest owed outcome (dead letters, and redriven ones,
    included) with nothing else of the key in flight; the first fill, the one delivery
    that fills the place an ack freed, and those after a redrive are the best eligible
    (highest priority, then oldest); in the end all is delivered."""
    loop = asyncio.new_event_loop()
    clock = MockTime()
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=200)
    p = NamedPurgatory(settings, LIMITS, loop, time=clock, reaper_enabled=False)
    try:
        selection = Selection(priorities=(URGENT,), ordering=KeySource())
        group, member = join(p, selection, prefetch=prefetch, attempts=MODEL_ATTEMPTS)
        group.leave(member)
        named = [(f"{'urgent/' if urgent else ''}{i}", key) for i, (key, urgent) in enumerate(ops)]
        end(p, *((op_id, key) if key else op_id for op_id, key in named))
        model = _Model(ops)
        _, member = join(p, selection, prefetch=prefetch, attempts=MODEL_ATTEMPTS)
        for d in taken(member):  # the first fill goes one by one, best first
            model.receive([d], check_best=True)
        for action in actions:
            if action == "ack" and model.held:
                model.ack(group, min(model.held))
                model.receive(taken(member), check_best=True)
            elif action == "expire":
                step(p, clock, VISIBILITY)
                model.expired()
                model.receive(taken(member), check_best=False)
            elif action == "redrive":
                model.redrive(group)  # all made ready, then one dispatch: best first
                model.receive(taken(member), check_best=True)
        while model.held or model.dead:
            model.redrive(group)
            model.receive(taken(member), check_best=False)
            for seq in sorted(model.held):
                model.ack(group, seq)
                model.receive(taken(member), check_best=False)
        assert not model.owed and len(group) == 0
    finally:
        p.shutdown_engine()
        loop.close()


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans()), min_size=1, max_size=20
    ),
    actions=st.lists(st.sampled_from(["ack", "ack", "ack", "expire", "redrive"]), max_size=25),
    prefetch=st.integers(1, 4),
)
def test_ordering_and_priority_hold_under_acks_and_expiries(
    ops: list[tuple[str | None, bool]], actions: list[str], prefetch: int
) -> None:
    _run_model(ops, actions, prefetch)


@settings(max_examples=40, deadline=None)
@given(
    st.builds(
        pb.GroupSelection,
        priorities=st.lists(
            st.builds(
                pb.GroupPriority,
                operation_id_prefix=st.sampled_from(["", "urgent/", "é"]),
                key=st.sampled_from(["", "k", "x" * 257]),
                priority=st.integers(0, 2_000_000),
            ),
            max_size=3,
        ),
        ordering_key=st.one_of(
            st.none(),
            st.builds(pb.GroupKeySource, first_key=st.booleans()),
            st.builds(
                pb.GroupKeySource, operation_id_separator=st.sampled_from(["", "/", "x" * 17])
            ),
        ),
        rate_limit=st.one_of(
            st.none(),
            st.builds(
                pb.GroupRateLimit,
                max=st.integers(0, 200_000),
                window_ms=st.integers(0, 4_000_000),
            ),
        ),
    )
)
def test_any_selection_is_refused_by_field_or_spelled_back(msg: pb.GroupSelection) -> None:
    try:
        selection = selection_from_proto(msg, 256)
    except InvalidArgument as refused:
        assert refused.field.startswith("selection")
        return
    if selection is not None:
        assert selection_from_bytes(selection_to_proto(selection).SerializeToString()) == selection


def _run_rate_model(keys: list[str | None], steps: list[int], per_key: bool) -> None:
    """Outcomes under a rate limit (2 per 100 ms, maybe per key), the clock moved in
    random steps, every delivery acked at once: no window holds more than 2 deliveries
    (of one key, per key), and every outcome goes out."""
    loop = asyncio.new_event_loop()
    clock = MockTime()
    settings = PurgatorySettings(name="p", tick_ms=1, wheel_size=20, max_pending=200)
    p = NamedPurgatory(settings, LIMITS, loop, time=clock, reaper_enabled=False)
    try:
        limit = RateLimit(2, 100, KeySource() if per_key else None)
        group, member = join(p, Selection(rate_limit=limit))
        end(p, *((f"o{i}", k) if k else f"o{i}" for i, k in enumerate(keys)))
        times: dict[str, list[int]] = {}
        got = 0
        for ms in [*steps, *([100] * (len(keys) // 2 + 1))]:  # then enough to finish
            for d in taken(member):
                group.ack(d.outcome.sequence, d.attempt)
                key = (d.outcome.keys[0] if d.outcome.keys else "") if per_key else ""
                times.setdefault(key, []).append(d.lease_deadline_ms - VISIBILITY)
                got += 1
            step(p, clock, ms)
        assert got == len(keys)
        for ts in times.values():
            assert all(b - a >= 100 for a, b in zip(ts[:-2], ts[2:], strict=True)), ts
    finally:
        p.shutdown_engine()
        loop.close()


@settings(max_examples=30, deadline=None)
@given(
    keys=st.lists(st.sampled_from(["a", "b", None]), min_size=1, max_size=12),
    steps=st.lists(st.integers(1, 120), max_size=15),
    per_key=st.booleans(),
)
def test_rate_limit_holds_at_any_step(
    keys: list[str | None], steps: list[int], per_key: bool
) -> None:
    _run_rate_model(keys, steps, per_key)


def test_all_windows_together_hold_at_most_max_times() -> None:
    limiter = RateLimiter(RateLimit(3, 100, KeySource()), max_times=4)
    for key, at in (("a", 1_000), ("a", 1_010), ("b", 1_020), ("b", 1_030)):
        assert limiter.free_at(key, at) == 0
        limiter.record(key, at)
    # a and b each have room, but the windows are full together: the oldest time leaves
    # first (a's at 1_000), then there is room for one more, under any key.
    assert limiter.free_at("a", 1_040) == 1_100
    assert limiter.free_at("c", 1_040) == 1_100
    assert limiter.free_at("b", 1_100) == 0
