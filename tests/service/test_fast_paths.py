"""The service's hot-path shortcuts agree with the general code they bypass.

- ``FirstSignal`` (ANY_KEY progress) snapshots exactly like ``Progress`` fed the same
  signal, including source and data limits;
- ``operation_requests`` / ``signals_from_proto`` accept what the per-element converters
  accept, build equal values, and reject the same inputs with the same field names;
- ``batch_status_response`` builds the same message as per-operation ``operation_status``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.progress import FirstSignal, Progress, make_progress
from purgatory_server._service.model.conditions import (
    EMPTY_RESULT,
    EMPTY_SIGNAL,
    ConditionSpec,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.model.errors import ServiceError
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import (
    add_event,
    add_status,
    batch_status_response,
    event_fields,
    operation_status,
    status_fields,
    status_response,
)
from purgatory_server._service.wire.validation import (
    FieldPrefixes,
    _bounds,
    _checked_request,
    _plain_request,
    operation_request,
    operation_requests,
    signal_from_proto,
    signals_from_proto,
)

LIMITS = Limits(max_result_data_bytes=4, max_key_length=8, max_keys_per_operation=3)

SIGNALS = [
    EMPTY_SIGNAL,
    SignalRecord(),
    SignalRecord(amount=7, value=3, source="r1", data=b"ab"),
    SignalRecord(amount=-2, value=0, data=b"abcdefgh"),  # data over the limit
    SignalRecord(source="r2", data=b"abcd"),  # data exactly at the limit
]


@pytest.mark.parametrize("signal", SIGNALS)
@pytest.mark.parametrize("sources_limit", [0, 1, 8])
def test_first_signal_snapshots_like_progress(signal: SignalRecord, sources_limit: int) -> None:
    spec = ConditionSpec()
    light = make_progress(spec, ("k", "j"), {}, data_limit=4, sources_limit=sources_limit)
    full = Progress(spec, ("k", "j"), {}, data_limit=4, sources_limit=sources_limit)
    assert isinstance(light, FirstSignal)
    assert not light.satisfied() and not full.satisfied()
    assert light.snapshot() == full.snapshot()
    light = light.add("j", signal)
    full = full.add("j", signal)
    assert light.satisfied() and full.satisfied()
    assert light.snapshot() == full.snapshot()


def test_first_signal_keeps_the_first_signal_only() -> None:
    light = FirstSignal(data_limit=10, sources_limit=10)
    light = light.add("a", SignalRecord(amount=1))
    light = light.add("b", SignalRecord(amount=2))
    assert light.snapshot() == ResultSnapshot(1, (), ("a",), 1)


def test_unsignalled_first_signal_is_shared_and_never_changes() -> None:
    """Every pending ANY_KEY operation shares one unsignalled progress: a signal makes a
    new one for the operation that got it and leaves the shared one as it was."""
    a = make_progress(ConditionSpec(), ("k",), {}, data_limit=4, sources_limit=2)
    b = make_progress(ConditionSpec(), ("j",), {}, data_limit=4, sources_limit=2)
    assert a is b
    signalled = a.add("k", SignalRecord(amount=3))
    assert signalled is not a and signalled.snapshot().amount_sum == 3
    assert not a.satisfied() and a.snapshot() == b.snapshot() == ResultSnapshot()


def _spec(**kw: Any) -> Any:
    return pb.OperationSpec(**{"keys": ["k"], "timeout_ms": 1000, **kw})


def _matching(path: str, attributes: dict[str, Any]) -> pb.Condition:
    condition = pb.Condition(min_signals=pb.MinSignalsCondition(count=2), match=path)
    condition.attributes.update(attributes)
    return condition


VALID_SPECS = [
    _spec(),
    _spec(operation_id="op-1", payload=b"p", keys=["a", "b", "c"]),
    _spec(keys=[]),
    _spec(condition=pb.Condition(any_key=pb.AnyKeyCondition())),
    _spec(condition=pb.Condition(all_keys=pb.AllKeysCondition()), keys=["a", "b"]),
    _spec(condition=pb.Condition(filter="signal.attributes.approved")),
    _spec(condition=_matching("invoice", {"invoice": 42}), keys=["a", "b"]),
]
# Specs that only the full path takes (a due time, a debounce): equal values either way.
CHECKED_ONLY_SPECS = [
    _spec(timeout_ms=0, due_time_ms=time.time_ns() // 1_000_000 + 3_600_000),
    _spec(extend_on_resend=True, max_extend_ms=5000),
]
INVALID_SPECS = [
    _spec(keys=["a", "b", "c", "d"]),  # too many keys
    _spec(keys=[""]),
    _spec(keys=["x" * 9]),
    _spec(keys=["a", "a"]),
    _spec(timeout_ms=0),
    _spec(operation_id="o" * 200),
    _spec(payload=b"x" * (LIMITS.max_payload_bytes + 1)),
    _spec(condition=pb.Condition(all_keys=pb.AllKeysCondition()), keys=[]),
    _spec(condition=pb.Condition(filter="signal.attributes.approved +")),  # syntax
    _spec(condition=pb.Condition(filter="signal.amount")),  # not a bool
    _spec(condition=pb.Condition(match="invoice")),  # no attributes to match
    _spec(condition=pb.Condition(min_signals=pb.MinSignalsCondition(count=0))),
    _spec(condition=_matching("invoice", {"invoice": "x" * 20_000})),  # attributes too big
]


def test_common_path_builds_what_the_checked_path_builds() -> None:
    fast = [_plain_request(m, _bounds(LIMITS), LIMITS) for m in VALID_SPECS]
    assert fast == [_checked_request("", m, LIMITS) for m in VALID_SPECS]
    assert fast[-1] is not None and fast[-1].definition.condition.gate is not None
    assert all(_plain_request(m, _bounds(LIMITS), LIMITS) is None for m in CHECKED_ONLY_SPECS)
    assert all(_plain_request(m, _bounds(LIMITS), LIMITS) is None for m in INVALID_SPECS)


def test_operation_requests_equal_the_single_converter() -> None:
    specs = VALID_SPECS + CHECKED_ONLY_SPECS
    batch = operation_requests("operations", specs, LIMITS)
    single = [_checked_request(f"operations[{i}].", m, LIMITS) for i, m in enumerate(specs)]
    assert batch == single
    assert [operation_request("", m, LIMITS) for m in specs] == single


@pytest.mark.parametrize("bad", INVALID_SPECS)
def test_operation_requests_reject_like_the_single_converter(bad: Any) -> None:
    with pytest.raises(ServiceError) as single:
        _checked_request("operations[1].", bad, LIMITS)
    with pytest.raises(ServiceError) as batch:
        operation_requests("operations", [_spec(), bad], LIMITS)
    assert type(batch.value) is type(single.value)
    assert batch.value.message == single.value.message
    assert "operations[1]." in batch.value.message


def test_signals_from_proto_equal_the_single_converter() -> None:
    items = [
        pb.KeySignal(key="a"),
        pb.KeySignal(key="b", signal=pb.Signal()),
        pb.KeySignal(key="c", signal=pb.Signal(amount=3, value=9, source="s", data=b"d")),
    ]
    got = signals_from_proto("signals", items, LIMITS)
    want = [
        (m.key, signal_from_proto(f"signals[{i}].signal", m.signal, LIMITS))
        for i, m in enumerate(items)
    ]
    assert got == want
    assert got[0][1] is EMPTY_SIGNAL


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (pb.KeySignal(key=""), "signals[1].key"),
        (pb.KeySignal(key="k" * 9), "signals[1].key"),
        (pb.KeySignal(key="k", signal=pb.Signal(source="s" * 9)), "signals[1].signal.source"),
    ],
)
def test_signals_from_proto_name_the_field(item: Any, field: str) -> None:
    with pytest.raises(ServiceError) as err:
        signals_from_proto("signals", [pb.KeySignal(key="ok"), item], LIMITS)
    assert field in err.value.message


def test_field_prefixes_are_built_on_demand() -> None:
    names = FieldPrefixes("operations", 3)
    assert len(names) == 3
    assert list(names) == ["operations[0].", "operations[1].", "operations[2]."]
    assert names[-1] == "operations[2]." and names[1:] == ["operations[1].", "operations[2]."]
    with pytest.raises(IndexError):
        names[3]


def test_batch_status_response_equals_per_operation_statuses() -> None:
    results = [
        ResultSnapshot(),
        ResultSnapshot(1, (), ("k",)),
        ResultSnapshot(3, ("a", "b"), ("k", "j"), -5, (("k", 7),), b"xy", True),
    ]
    outcomes = [
        Outcome(i + 1, "p", f"op{i}", OperationState.COMPLETED, ("k",), b"pl", r, 10, 20, 15)
        for i, r in enumerate(results)
    ]
    registered = [(o, i % 2 == 0) for i, o in enumerate(outcomes)]
    want = pb.BatchTryCompleteElseWatchResponse(
        operations=[
            pb.OperationStatus(
                operation_id=o.operation_id,
                state=pb.OPERATION_STATE_COMPLETED,
                result=pb.OperationResult(
                    signal_count=o.result.signal_count,
                    sources=o.result.sources,
                    signalled_keys=o.result.signalled_keys,
                    amount_sum=o.result.amount_sum,
                    values=dict(o.result.values),
                    data=o.result.data,
                    data_truncated=o.result.data_truncated,
                ),
                sequence=o.sequence,
                created=created,
                create_time_ms=10,
                due_time_ms=20,
                complete_time_ms=15,  # no payload: a registration's answer leaves it out
            )
            for o, created in registered
        ]
    )
    got = batch_status_response(registered)
    assert got == want
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    expected = [operation_status(t, created) for t, created in registered]
    for status in expected:
        assert status.payload == b"pl"  # ForceComplete's, Cancel's: with the payload
        status.ClearField("payload")
    assert list(got.operations) == expected


def _outcome(result: ResultSnapshot, payload: bytes = b"", trace: str = "") -> Outcome:
    return Outcome(
        7, "p", "id-1", OperationState.COMPLETED, ("k", "j"), payload, result, 1, 2, 3, trace
    )


RESULTS = [
    EMPTY_RESULT,
    ResultSnapshot(),  # all defaults, not the shared instance
    ResultSnapshot(1, (), ("k",)),
    ResultSnapshot(3, ("r1", "r2"), ("k", "j"), -5, (("k", 4),), b"ab", True),
]


@pytest.mark.parametrize("result", RESULTS)
def test_in_place_event_and_status_equal_the_keyword_forms(result: ResultSnapshot) -> None:
    """add_event / add_status (keywords, result set in place) build the messages that
    event_fields / status_fields build, presence of an empty result included."""
    for outcome in (_outcome(result), _outcome(result, b"pay", "00-ab-cd-01")):
        fast = pb.SessionResponse()
        add_event(fast.outcomes.add, outcome)
        slow = pb.SessionResponse()
        slow.outcomes.add(**event_fields(outcome))
        assert fast == slow
        assert fast.SerializeToString() == slow.SerializeToString()
        for created in (True, False):
            response = pb.BatchTryCompleteElseWatchResponse()
            add_status(response.operations.add, outcome, created)
            fields = status_fields(outcome, created)
            expected = pb.OperationStatus(**fields)  # a registration's answer: no payload
            assert response.operations[0] == expected
            assert response.operations[0].HasField("result") == expected.HasField("result")
            unary = status_response(outcome, created)
            assert unary == pb.TryCompleteElseWatchResponse(**fields)
            assert unary.HasField("result")
