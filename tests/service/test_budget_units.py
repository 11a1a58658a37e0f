"""The memory budget's parts in process: pools and shares, the retained pool shedding the
largest holder's oldest entries, shared signal data and its charges, the encoded-event
cache (docs/service.md "Limits")."""

from __future__ import annotations

import gc

import pytest
from purgatory_server._service.api.event_cache import ENTRY_BYTES, EncodedEvents
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.core.progress import Progress
from purgatory_server._service.core.signal_data import LINK_BYTES, MAX_DEPTH, DataLink
from purgatory_server._service.model.conditions import (
    ConditionKind,
    ConditionSpec,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.model.errors import InvalidArgument, LimitExceeded
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.sizes import outcome_bytes
from purgatory_server._service.outcomes.event_log import EventLog

MIB = 1 << 20


def _budget(**limits: int) -> ServerBudget:
    return ServerBudget(Limits(memory_budget_bytes=100 * MIB, **limits))


def _outcome(seq: int, payload: bytes = b"", name: str = "p") -> Outcome:
    state = OperationState.COMPLETED
    return Outcome(seq, name, f"op{seq}", state, ("k",), payload, ResultSnapshot(), 0, 0, 0)


def test_pools_and_shares_from_the_limits() -> None:
    budget = _budget()
    assert budget.capacity == 100 * MIB
    assert budget.retained_capacity == 25 * MIB
    assert budget.held_capacity == 75 * MIB
    assert budget.share == budget.held_capacity // 2
    # 0: a fraction of the machine's memory.
    auto = ServerBudget(Limits(memory_budget_percent=10), memory=1000 * MIB)
    assert auto.capacity == 100 * MIB


def test_a_share_refuses_what_frees_up_and_invalidates_what_never_fits() -> None:
    budget = _budget()
    a, b = budget.account("a"), budget.account("b")
    a.reserve(1, 0, budget.share - 10, "operations")
    with pytest.raises(LimitExceeded, match="share of the memory budget"):
        a.reserve(1, 0, 100, "operations")
    b.reserve(1, 0, budget.share, "operations")  # another purgatory: its own share
    with pytest.raises(LimitExceeded, match="memory_budget_bytes"):
        budget.account("c").reserve(1, 0, budget.held_capacity // 4, "operations")
    with pytest.raises(InvalidArgument, match="can never fit") as never:
        a.reserve(5, 0, budget.share + 1, "operations")
    assert never.value.field == "operations"
    a.release_many(1, 0, budget.share - 10)  # frees up
    a.reserve(1, 0, 100, "operations")
    assert not budget.try_charge(budget.held_capacity)  # stream buffers: no room
    assert budget.try_charge(1000)
    budget.release(1000)


def test_the_retained_pool_sheds_the_largest_window_oldest_first() -> None:
    budget = _budget(retained_memory_percent=1)  # 1 MiB
    big, small = EventLog(1_000_000), EventLog(1_000_000)
    budget.account("big").hold(big)
    budget.account("small").hold(small)
    payload = b"x" * 64 * 1024
    small.append(_outcome(small.next_sequence(), payload))
    for _ in range(40):
        big.append(_outcome(big.next_sequence(), payload))
    assert budget.retained <= budget.retained_capacity
    assert budget.retained == big.retained_bytes + small.retained_bytes
    assert len(small) == 1  # the largest gave up its oldest
    assert big.oldest_sequence > 1 and big.last_sequence == 40
    with pytest.raises(Exception, match="no longer retained"):
        big.after(0)
    # By count as before: what the count drops is no longer charged.
    counted = EventLog(2)
    budget.account("counted").hold(counted)
    for _ in range(5):
        counted.append(_outcome(counted.next_sequence()))
    assert counted.retained_bytes == 2 * outcome_bytes(_outcome(1))


def test_signal_data_is_stored_once_and_charged_while_referenced() -> None:
    budget = _budget()
    account = budget.account("p")
    root = DataLink.root(account)
    spec = ConditionSpec(ConditionKind.MIN_SIGNALS, count=10)
    ops = [
        Progress(spec, ("k",), {}, data_limit=256 * 1024, sources_limit=8, data_root=root)
        for _ in range(2000)
    ]
    chunks = [bytes([n]) * 64 * 1024 for n in range(5)]
    for chunk in chunks:
        signal = SignalRecord(data=chunk)
        for progress in ops:
            progress.add("k", signal)
    # Four links of 64 KiB (the fifth does not fit the 256 KiB limit: truncated, empty).
    assert account.held == 4 * (64 * 1024 + LINK_BYTES)
    results = {id(p.snapshot().data) for p in ops}
    assert len(results) == 1  # one joined bytes object for every outcome
    first = ops[0].snapshot()
    assert first.data == b"".join(chunks[:4]) and first.data_truncated
    del ops, progress, first
    gc.collect()
    budget.drain()
    assert account.held == 0 and budget.held == 0


def test_a_long_chain_is_joined_before_it_gets_deep() -> None:
    root = DataLink.root(None)
    link = root
    for n in range(MAX_DEPTH * 3):
        link = link.add(SignalRecord(data=bytes([n % 256])), 1 << 20)
    assert link.depth <= MAX_DEPTH
    assert link.data() == bytes(n % 256 for n in range(MAX_DEPTH * 3))


def test_each_outcome_is_encoded_once_for_every_stream() -> None:
    budget = _budget()
    cache = EncodedEvents(budget, capacity=1 * MIB)
    outcome = _outcome(1, b"p" * 1000)
    first = cache.encode(outcome, shared=True)
    assert cache.encode(outcome, shared=True) is first and cache.hits == 1
    assert budget.held == len(first) + ENTRY_BYTES
    alone = _outcome(2)  # one stream: sent, not cached
    assert cache.encode(alone, shared=False) is not cache.encode(alone, shared=False)
    for seq in range(3, 40):  # bounded: the oldest go, their bytes given back
        cache.encode(_outcome(seq, b"q" * 64 * 1024), shared=True)
    assert budget.held <= 1 * MIB
    assert cache.encode(outcome, shared=True) is not first
    cache.clear()
    assert budget.held == 0


def _registry(**limits: int):  # type: ignore[no-untyped-def]
    import asyncio

    from purgatory_server._engine.time import MockTime
    from purgatory_server._service.config.server_config import PurgatorySettings
    from purgatory_server._service.core.registry import PurgatoryRegistry

    return PurgatoryRegistry(
        Limits(memory_budget_bytes=4 * MIB, **limits),
        PurgatorySettings(),
        asyncio.get_running_loop(),
        time=MockTime(),
        reaper_enabled=False,
    )


def _request(op_id: str, keys: tuple[str, ...], condition: ConditionSpec | None = None):  # type: ignore[no-untyped-def]
    from purgatory_server._service.model.definitions import OperationDefinition, OperationRequest

    spec = condition if condition is not None else ConditionSpec()
    return OperationRequest(op_id, OperationDefinition(keys, 600_000, spec, b""))


def _fill(p, prefix: str) -> None:  # type: ignore[no-untyped-def]
    """Register ANY_KEY operations of 100 long keys (~65 KB each) until the share is full."""
    keys = tuple(f"{prefix}{k:05d}".ljust(200, "k") for k in range(100))
    with pytest.raises(LimitExceeded, match="share of the memory budget"):
        for n in range(1000):
            p.register([_request(f"{prefix}{n}", (f"{prefix}{n}", *keys))], [""])


async def test_a_full_purgatory_can_still_be_signalled_unless_the_data_would_be_kept() -> None:
    registry = _registry()
    p = registry.create(registry.settings_for("p", None))
    _fill(p, "a")
    data = SignalRecord(data=b"d" * 100_000)  # more than the room left
    assert p.signal([("a1", data)]) == [1]  # ANY_KEY watchers end on it, keeping nothing
    p.register([_request("acc", ("shared",), ConditionSpec(ConditionKind.ALL_KEYS))], [""])
    _fill(p, "b")
    with pytest.raises(LimitExceeded, match="share of the memory budget"):
        p.signal([("shared", data)])  # an accumulating watcher would keep it
    assert p.signal([("shared", SignalRecord())]) == [1]  # without data: fine
    await registry.shutdown()


async def test_deleting_a_purgatory_gives_back_everything_it_held() -> None:
    registry = _registry()
    budget = registry.budget
    p = registry.create(registry.settings_for("p", None))
    spec = ConditionSpec(ConditionKind.MIN_SIGNALS, count=5)
    p.register([_request(f"op{i}", ("k",), spec) for i in range(100)], [""] * 100)
    p.signal([("k", SignalRecord(data=b"x" * 1000))])
    p.register([_request("done", ("j",))], [""])
    p.signal([("j", SignalRecord())])  # one outcome retained and remembered
    assert budget.held > 0 and budget.retained > 0 and budget.pending == 100
    await registry.delete("p")
    gc.collect()
    budget.drain()
    assert (budget.held, budget.retained, budget.pending, budget.payload_bytes) == (0, 0, 0, 0)
    await registry.shutdown()


def test_an_outcome_carries_its_size_without_it_changing_what_it_is() -> None:
    plain = _outcome(1, b"p" * 100)
    sized = plain._replace(nbytes=outcome_bytes(plain))
    assert sized.nbytes == outcome_bytes(plain) > 100  # computed once, read after
    assert sized == plain and hash(sized) == hash(plain)
    assert outcome_bytes(sized) == outcome_bytes(plain)


async def test_an_evicted_purgatory_leaves_the_budget_with_its_pending_operations() -> None:
    from purgatory_server._service.model.errors import ShuttingDown

    registry = _registry()
    budget = registry.budget
    p = registry.create(registry.settings_for("p", None))
    spec = ConditionSpec(ConditionKind.MIN_SIGNALS, count=5)
    p.register([_request(f"op{i}", ("k",), spec) for i in range(10)], [""] * 10)
    p.signal([("k", SignalRecord(data=b"x" * 1000))])
    assert budget.pending == 10 and budget.held > 0
    await registry.evict("p", ShuttingDown())
    gc.collect()
    budget.drain()
    assert (budget.held, budget.retained, budget.pending) == (0, 0, 0)
    await registry.shutdown()


def test_a_subscriber_buffer_is_charged_until_sent_or_dropped() -> None:
    """Subscribe buffers count against the held pool (docs/service.md "Limits"): each
    buffered outcome is charged until it is sent, a stream that goes away gives its whole
    charge back, and a stream that holds some while the pool is full is cut, not grown."""
    from purgatory_server._service.model.errors import SlowSubscriber
    from purgatory_server._service.outcomes.subscriptions import MATCH_ALL, Subscriber

    budget = _budget()
    cut: list[Subscriber] = []
    sub = Subscriber(MATCH_ALL, 100, (), 0, on_cut=cut.append, buffers=budget)
    sub.offer(_outcome(1), 1000)
    sub.offer(_outcome(2), 2000)
    assert budget.held == 3000
    assert sub.pop() is not None
    assert budget.held == 2000
    sub.drop()
    assert budget.held == 0
    # The pool full (pending work holds it): a stream with an outcome buffered is cut.
    budget.held = budget.held_capacity - 500
    full = Subscriber(MATCH_ALL, 100, (), 0, on_cut=cut.append, buffers=budget)
    full.offer(_outcome(3), 400)
    full.offer(_outcome(4), 400)
    assert cut == [full]
    assert budget.held == budget.held_capacity - 500  # the cut gave its charge back
    assert full.buffered == 0
    assert isinstance(full._error, SlowSubscriber)  # its stream ends RESOURCE_EXHAUSTED
    # An empty buffer still takes one outcome (uncharged), so every stream progresses.
    budget.held = budget.held_capacity
    empty = Subscriber(MATCH_ALL, 100, (), 0, buffers=budget)
    empty.offer(_outcome(5), 400)
    assert empty.pop() is not None
    assert budget.held == budget.held_capacity
