"""NamedPurgatory built directly (no server, no gRPC), on MockTime without a reaper.

Registration, signals, force-complete, cancel, expiry and restore, as the RPCs use them:
every call that ends operations answers with their published outcomes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from purgatory_server._engine.time import MockTime
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.model.conditions import ConditionKind, ConditionSpec, SignalRecord
from purgatory_server._service.model.definitions import OperationDefinition, OperationRequest
from purgatory_server._service.model.errors import (
    AlreadyExists,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    ShuttingDown,
)
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.subscriptions import MATCH_ALL

ANY = ConditionSpec()


def request(op_id: str, *keys: str, timeout_ms: int = 1000, **cond: object) -> OperationRequest:
    condition = ConditionSpec(**cond) if cond else ANY  # type: ignore[arg-type]
    return OperationRequest(op_id, OperationDefinition(keys or ("k",), timeout_ms, condition, b""))


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
async def purgatory(clock: MockTime) -> AsyncIterator[NamedPurgatory]:
    p = NamedPurgatory(
        PurgatorySettings(name="p", max_pending=3),
        Limits(),
        asyncio.get_running_loop(),
        time=clock,
        reaper_enabled=False,
    )
    try:
        yield p
    finally:
        p.close(ShuttingDown())
        p.shutdown_engine()


def register_one(purgatory: NamedPurgatory, req: OperationRequest) -> tuple[object, bool]:
    ((target, created),) = purgatory.register((req,), ("",))
    return target, created


async def test_register_is_idempotent_and_all_or_nothing(purgatory: NamedPurgatory) -> None:
    op, created = register_one(purgatory, request("a"))
    assert isinstance(op, RemoteOperation) and created
    assert register_one(purgatory, request("a")) == (op, False)
    with pytest.raises(AlreadyExists):
        register_one(purgatory, request("a", "other-key"))
    with pytest.raises(InvalidArgument, match=r"operations\[1\]\.operation_id"):
        purgatory.register([request("b"), request("b")], ("operations[0].", "operations[1]."))
    with pytest.raises(LimitExceeded, match="max_pending is 3"):
        purgatory.register([request("c"), request("d"), request("e")], ("", "", ""))
    assert purgatory.stats().pending == 1  # the failed batches left nothing behind


async def test_a_signal_publishes_to_waiters_and_subscribers(purgatory: NamedPurgatory) -> None:
    sub = purgatory.subscribe(None, MATCH_ALL)
    op, _ = register_one(purgatory, request("a"))
    assert isinstance(op, RemoteOperation)
    waiting = asyncio.ensure_future(purgatory.feed.wait_one(op))
    await asyncio.sleep(0)
    assert purgatory.signal([("k", SignalRecord(amount=2))]) == [1]
    outcome = await waiting
    assert (outcome.sequence, outcome.state, outcome.result.amount_sum) == (
        1,
        OperationState.COMPLETED,
        2,
    )
    assert await sub.next_batch() == [outcome]
    # A re-send after the end answers with the remembered outcome.
    assert register_one(purgatory, request("a")) == (outcome, False)
    assert purgatory.lookup("a") == outcome


async def test_an_operation_ending_during_its_registration_answers_with_its_outcome(
    purgatory: NamedPurgatory,
) -> None:
    purgatory.signal([("k", SignalRecord(value=5))])
    target, created = register_one(
        purgatory, request("v", kind=ConditionKind.VALUES_AT_LEAST, default_target=3)
    )
    assert created and isinstance(target, Outcome)
    assert (target.state, target.sequence) == (OperationState.COMPLETED, 1)


async def test_a_batch_mixing_satisfied_and_waiting_registrations(
    purgatory: NamedPurgatory, clock: MockTime
) -> None:
    """Fresh unsatisfied operations are watched and armed without Kafka's tries, a
    satisfied one completes at registration, and both kinds then end as usual (by a
    signal, by expiry), each exactly once."""
    purgatory.signal([("v", SignalRecord(value=5))])
    (done, _), (waiting, _), (timer, _) = purgatory.register(
        [
            request("a", "v", kind=ConditionKind.VALUES_AT_LEAST, default_target=3),
            request("b", "k"),
            request("c", "t", timeout_ms=10),
        ],
        ("", "", ""),
    )
    assert isinstance(done, Outcome) and done.state is OperationState.COMPLETED
    assert isinstance(waiting, RemoteOperation) and isinstance(timer, RemoteOperation)
    fresh, _ = register_one(purgatory, request("d", "k"))
    assert isinstance(fresh, RemoteOperation)
    assert purgatory.signal([("k", SignalRecord())]) == [2]  # b and d, once each
    assert purgatory.signal([("k", SignalRecord())]) == [0]
    assert purgatory.stats().pending == 1  # c, on its timer only
    clock.sleep(20)
    purgatory.advance_clock(20)
    expired = purgatory.lookup("c")
    assert isinstance(expired, Outcome) and expired.state is OperationState.EXPIRED
    assert purgatory.stats().pending == 0


async def test_force_complete_and_cancel_answer_with_outcomes(purgatory: NamedPurgatory) -> None:
    purgatory.register([request("a"), request("b"), request("c", "other")], ("", "", ""))
    won, outcome = purgatory.force_complete("a")
    assert won and isinstance(outcome, Outcome)
    assert outcome.state is OperationState.FORCE_COMPLETED
    assert purgatory.force_complete("a") == (False, outcome)
    cancelled = purgatory.cancel(key="k")
    assert [(o.operation_id, o.state) for o in cancelled] == [("b", OperationState.CANCELLED)]
    assert purgatory.cancel(["b", "c", "unknown"])[0].operation_id == "c"
    with pytest.raises(NotFound):
        purgatory.force_complete("unknown")
    assert (purgatory.stats().last_sequence, purgatory.stats().pending) == (3, 0)


async def test_expiry_on_the_mock_clock(purgatory: NamedPurgatory, clock: MockTime) -> None:
    sub = purgatory.subscribe(None, MATCH_ALL)
    register_one(purgatory, request("slow", timeout_ms=500))
    clock.sleep(499)
    purgatory.advance_clock(0)
    assert purgatory.stats().pending == 1
    clock.sleep(1)
    purgatory.advance_clock(0)
    (outcome,) = await asyncio.wait_for(sub.next_batch(), 10)
    assert (outcome.operation_id, outcome.state) == ("slow", OperationState.EXPIRED)
    assert outcome.complete_time_ms - outcome.create_time_ms == 500


async def test_restore_takes_the_creation_path_of_a_live_registration(
    purgatory: NamedPurgatory,
) -> None:
    wall = purgatory.wall_clock_ms()
    definition = request("r", "k", "j", kind=ConditionKind.MIN_SIGNALS, count=2).definition
    purgatory.restore_operations(
        [("r", definition, wall - 100, wall + 400, [("k", SignalRecord())])]
    )
    op = purgatory.lookup("r")
    assert isinstance(op, RemoteOperation)
    assert (op.create_time_ms, op.due_time_ms) == (wall - 100, wall + 400)
    assert op.progress.snapshot().signal_count == 1  # replayed
    # Idempotent like a live one, and the second signal completes it.
    assert register_one(purgatory, OperationRequest("r", definition)) == (op, False)
    assert purgatory.signal([("j", SignalRecord())]) == [1]
    ended = purgatory.lookup("r")
    assert isinstance(ended, Outcome) and ended.state is OperationState.COMPLETED


async def test_close_fails_waiting_calls(purgatory: NamedPurgatory) -> None:
    op, _ = register_one(purgatory, request("a"))
    assert isinstance(op, RemoteOperation)
    waiting = asyncio.ensure_future(purgatory.feed.wait_one(op))
    await asyncio.sleep(0)
    purgatory.close(ShuttingDown())
    with pytest.raises(ShuttingDown):
        await waiting
    with pytest.raises(ShuttingDown):
        purgatory.signal([("k", SignalRecord())])
