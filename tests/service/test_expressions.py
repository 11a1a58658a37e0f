"""Conditions with expressions (docs/conditions.md): a CEL filter with every kind, the
predicate, ``match`` and its index, the checks at registration and the cost limit; one
server for the module, each test on its own keys."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from purgatory_client import AsyncPurgatoryClient, Condition, OperationState, Signal
from purgatory_client.errors import InvalidArgumentError
from purgatory_server._engine.time import MockTime
from purgatory_server._service import create_server
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core import progress as progress_module
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.progress import make_progress
from purgatory_server._service.model.attributes import Attributes
from purgatory_server._service.model.conditions import ConditionSpec, Gate, SignalRecord
from purgatory_server._service.model.definitions import OperationDefinition, OperationRequest
from purgatory_server._service.model.errors import ShuttingDown

from tests.service.helpers import TEST_CONFIG

pytestmark = pytest.mark.asyncio(loop_scope="module")

FINANCE = "signal.attributes.role == 'finance'"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[AsyncPurgatoryClient]:
    server, port = await create_server("127.0.0.1:0", TEST_CONFIG)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            yield c
    finally:
        await server.stop(0.5)


async def _state(client: AsyncPurgatoryClient, op_id: str) -> OperationState:
    return (await client.get_operation(op_id)).state


async def test_filter_with_distinct_sources(client: AsyncPurgatoryClient) -> None:
    """2 distinct approvers whose role is 'finance'."""
    cond = Condition.min_signals(2, distinct_sources=True).where(FINANCE)
    await client.try_complete_else_watch(["inv-1"], 60_000, condition=cond, operation_id="f1")
    finance = {"role": "finance"}
    assert await client.check_and_complete("inv-1", Signal(source="ann", attributes=finance)) == 0
    assert await client.check_and_complete("inv-1", Signal(source="ann", attributes=finance)) == 0
    sales = Signal(source="bob", attributes={"role": "sales"})
    assert await client.check_and_complete("inv-1", sales) == 0
    assert await client.check_and_complete("inv-1", Signal(source="bob")) == 0  # no attributes
    assert await _state(client, "f1") is OperationState.WATCHING
    last = Signal(source="cy", attributes={"role": "finance", "n": 3})
    assert await client.check_and_complete("inv-1", last) == 1
    done = await client.get_operation("f1")
    assert done.state is OperationState.COMPLETED
    assert done.result.sources == ("ann", "cy")  # only the signals that counted
    assert done.result.matched_key == "inv-1"
    assert done.result.matched_attributes == {"role": "finance", "n": 3}


async def test_filter_with_every_kind(client: AsyncPurgatoryClient) -> None:
    big = "signal.attributes.size > 10"
    conditions = {
        "k-any": Condition.any_key().where(big),
        "k-all": Condition.all_keys().where(big),
        "k-min": Condition.min_signals(2).where(big),
        "k-sum": Condition.sum_at_least(5).where(big),
        "k-val": Condition.values_at_least(default_target=7).where(big),
    }
    for name, cond in conditions.items():
        await client.try_complete_else_watch([name], 60_000, condition=cond, operation_id=name)
        small = Signal(amount=5, value=9, attributes={"size": 1})
        assert await client.check_and_complete(name, small) == 0, name
    large = Signal(amount=5, value=9, attributes={"size": 11})
    assert [await client.check_and_complete(n, large) for n in conditions] == [1, 1, 0, 1, 1]
    assert await client.check_and_complete("k-min", large) == 1
    done = await client.get_operation("k-sum")
    assert done.result.amount_sum == 5  # the small signal did not count


async def test_filter_reads_the_operation_attributes(client: AsyncPurgatoryClient) -> None:
    cond = Condition.any_key().where(
        "signal.attributes.approved && signal.attributes.invoice_id == op.attributes.invoice_id",
        attributes={"invoice_id": 42},
    )
    await client.try_complete_else_watch(["approvals"], 60_000, condition=cond, operation_id="o1")
    other = Signal(attributes={"approved": True, "invoice_id": 41})
    assert await client.check_and_complete("approvals", other) == 0
    refused = Signal(attributes={"approved": False, "invoice_id": 42})
    assert await client.check_and_complete("approvals", refused) == 0
    ok = Signal(attributes={"approved": True, "invoice_id": 42})
    assert await client.check_and_complete("approvals", ok) == 1


async def test_match_completes_only_the_matching_operation(
    client: AsyncPurgatoryClient,
) -> None:
    for invoice in (1, 2, 3):
        cond = Condition.any_key().where(match="invoice_id", attributes={"invoice_id": invoice})
        await client.try_complete_else_watch(
            ["paid"], 60_000, condition=cond, operation_id=f"inv-{invoice}"
        )
    assert await client.check_and_complete("paid") == 0  # no attributes: no match
    assert await client.check_and_complete("paid", Signal(attributes={"invoice_id": 9})) == 0
    assert await client.check_and_complete("paid", Signal(attributes={"invoice_id": 2})) == 1
    states = [await _state(client, f"inv-{i}") for i in (1, 2, 3)]
    assert states == [OperationState.WATCHING, OperationState.COMPLETED, OperationState.WATCHING]
    # Cancel by key reaches match operations too.
    assert {o.operation_id for o in await client.cancel(key="paid")} == {"inv-1", "inv-3"}


async def test_predicate_over_the_result(client: AsyncPurgatoryClient) -> None:
    cond = Condition.min_signals(1).where(
        predicate="result.amount_sum >= 10 && size(result.sources) >= 2"
    )
    await client.try_complete_else_watch(["pr"], 60_000, condition=cond, operation_id="pr")
    assert await client.check_and_complete("pr", Signal(amount=20, source="a")) == 0
    assert await client.check_and_complete("pr", Signal(amount=1, source="b")) == 1
    done = await client.get_operation("pr")
    assert done.result.amount_sum == 21


@pytest.mark.parametrize(
    ("cond", "field", "words"),
    [
        (Condition().where("signal.attributes.x &&"), "condition.filter", "syntax error at 1:23"),
        (Condition().where("sig.x"), "condition.filter", "unknown variable or function 'sig'"),
        (Condition().where("signal.amount + 1"), "condition.filter", "must be a bool"),
        (Condition().where("signal.source + 1 == 2"), "condition.filter", "type error at 1:15"),
        (
            Condition().where("[1, 2].all(x, [1, 2].exists(y, y == x))"),
            "condition.filter",
            "cost limit at 1:21",
        ),
        (Condition().where(predicate="result.nope("), "condition.predicate", "syntax error"),
        (Condition().where(match="id"), "condition.match", "have no 'id'"),
        (
            Condition().where(match="id", attributes={"other": 1}),
            "condition.match",
            "have no 'id'",
        ),
        (Condition().where("true || " * 200 + "true"), "condition.filter", "max_expression"),
    ],
)
async def test_errors_at_registration(
    client: AsyncPurgatoryClient, cond: Condition, field: str, words: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await client.try_complete_else_watch(["bad"], 60_000, condition=cond)
    assert caught.value.field_violations[0][0] == field
    assert words in caught.value.details


async def test_oversized_attributes_are_refused(client: AsyncPurgatoryClient) -> None:
    huge = {"blob": "x" * 20_000}
    with pytest.raises(InvalidArgumentError) as caught:
        await client.check_and_complete("k", Signal(attributes=huge))
    assert caught.value.field_violations[0][0] == "signal.attributes"
    with pytest.raises(InvalidArgumentError) as caught:
        await client.try_complete_else_watch(
            ["k"], 60_000, condition=Condition().where("true", attributes=huge)
        )
    assert caught.value.field_violations[0][0] == "condition.attributes"


async def test_pathological_expression_does_not_stall_others(
    client: AsyncPurgatoryClient,
) -> None:
    # Nested comprehensions over ten elements, five deep: 10**5 steps and more per signal.
    ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    nested = "true"
    for name in "abcde":
        nested = f"{ten}.all({name}, {nested})"

    async def attack() -> None:
        for _ in range(20):
            with pytest.raises(InvalidArgumentError):
                await client.try_complete_else_watch(
                    ["evil"], 60_000, condition=Condition().where(nested)
                )

    async def other() -> float:
        started = time.perf_counter()
        await client.try_complete_else_watch(["calm"], 60_000, operation_id="calm")
        assert await client.check_and_complete("calm") == 1
        return time.perf_counter() - started

    _, took = await asyncio.gather(attack(), other())
    assert took < 2.0  # answered between the refusals, not after a stalled loop


async def test_match_index_tries_only_matching_operations() -> None:
    """A signal on a key with many waiting match operations tries one of them (counted:
    the operations whose progress saw the signal), not all."""
    p = NamedPurgatory(
        PurgatorySettings(name="m", max_pending=20_000),
        Limits(),
        asyncio.get_running_loop(),
        time=MockTime(),
        reaper_enabled=False,
    )
    try:
        n = 5_000
        requests = []
        for i in range(n):
            attributes = Attributes(str(i).encode(), {"invoice_id": i})
            gate = Gate(filter="signal.attributes.ok", match="invoice_id", attributes=attributes)
            definition = OperationDefinition(("paid",), 60_000, ConditionSpec(gate=gate), b"")
            requests.append(OperationRequest(f"op-{i}", definition))
        p.register(requests, [""] * n)
        ops = p.pending_operations()
        assert p.engine.watchers("paid") == []  # none waits on the key itself
        signal = SignalRecord(attributes=Attributes(b"s", {"invoice_id": 1234, "ok": True}))
        assert p.signal([("paid", signal)]) == [1]
        tried = [op.operation_id for op in ops if op._seen != 0]
        assert tried == ["op-1234"]
        miss = SignalRecord(attributes=Attributes(b"t", {"invoice_id": n + 1, "ok": True}))
        assert p.signal([("paid", miss)]) == [0]
        assert sum(op._seen != 0 for op in ops) == 1
    finally:
        p.close(ShuttingDown())
        p.shutdown_engine()


async def test_what_an_expression_reads_is_all_it_sees(client: AsyncPurgatoryClient) -> None:
    """Variables hold only the paths a text names (docs/conditions.md): an expression that
    reads a map whole (size, in, a method, an index) sees all of it, has() sees a path."""
    texts = [
        "size(signal.attributes) == 3",
        "'b' in signal.attributes && signal.attributes.a == 1",
        "has(signal.attributes.a) && !has(signal.attributes.c)",
        "signal.attributes['b'] == 'x' && signal.key == 'reads'",
        "signal.attributes.all(k, k in ['a', 'b', 'd']) && op.attributes.n.size() == 2",
    ]
    for i, text in enumerate(texts):
        cond = Condition.any_key().where(text, attributes={"n": [1, 2]})
        await client.try_complete_else_watch(
            ["reads"], 60_000, condition=cond, operation_id=f"reads-{i}"
        )
    assert await client.check_and_complete("reads", Signal(attributes={"a": 1, "c": 0})) == 0
    every = Signal(attributes={"a": 1, "b": "x", "d": 2})
    assert await client.check_and_complete("reads", every) == 5


def _attrs(value: dict[str, object]) -> Attributes:
    return Attributes(repr(sorted(value.items())).encode(), value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "signals", "counted", "kept"),
    [
        # true and 1 are equal in Python, not in CEL: a kept verdict tells them apart.
        (
            "signal.attributes.approved",
            [{"approved": True}, {"approved": 1}, {"approved": True}, {}, {"approved": "true"}],
            [True, False, True, False, False],
            4,
        ),
        # A field the filter reads only when present, and one it does not read at all.
        (
            "has(signal.attributes.role) && signal.attributes.role == 'finance'",
            [{"role": "finance", "n": 1}, {"n": 2}, {"role": "finance", "n": 3}, {"role": "x"}],
            [True, False, True, False],
            3,
        ),
        # A string longer than 64 characters is not kept (the memo's bound in bytes).
        (
            "signal.attributes.note != ''",
            [{"note": "x" * 65}, {"note": "x" * 65}, {"note": "y"}],
            [True, True, True],
            1,
        ),
        # A whole object read: nothing is kept, every signal is evaluated.
        (
            "size(signal.attributes) == 1",
            [{"a": 1}, {"a": 1, "b": 2}, {"b": 3}],
            [True, False, True],
            0,
        ),
    ],
)
async def test_kept_verdicts_agree_with_evaluating_each_signal(
    text: str, signals: list[dict[str, object]], counted: list[bool], kept: int
) -> None:
    spec = ConditionSpec(gate=Gate(filter=text))
    progress = make_progress(spec, ("k",), {}, data_limit=0, sources_limit=0)
    progress_module._VERDICTS.clear()
    got = []
    for value in signals:
        fresh = make_progress(spec, ("k",), {}, data_limit=0, sources_limit=0)
        fresh = fresh.add("k", SignalRecord(attributes=_attrs(value)))
        got.append(fresh.satisfied())
    assert got == counted
    assert not progress.satisfied()
    # One verdict per distinct value read (a repeat is a kept verdict's).
    assert len(progress_module._VERDICTS) == kept
