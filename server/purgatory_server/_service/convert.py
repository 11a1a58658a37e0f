"""Protobuf messages <-> the service's plain Python values.

The only module besides the servicer that knows the wire format. Inbound conversions
validate as they go (via :mod:`.limits`), so everything past this point can trust its
inputs; outbound ones build the response and event messages.
"""

from __future__ import annotations

from typing import Any, cast

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.conditions import (
    ConditionKind,
    ConditionSpec,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.config import Limits, PurgatorySettings
from purgatory_server._service.errors import InvalidArgument, LimitExceeded
from purgatory_server._service.events import Outcome
from purgatory_server._service.limits import (
    check_condition,
    check_data,
    check_keys,
    check_operation_id,
    check_payload,
    check_timeout,
)
from purgatory_server._service.operation import OperationDefinition, RemoteOperation
from purgatory_server._service.purgatory import OperationRequest, PurgatoryStats
from purgatory_server._service.states import FINAL_STATES, OperationState
from purgatory_server._service.subscriptions import EventFilter

__all__ = [
    "event_to_proto",
    "filter_from_proto",
    "operation_request",
    "operation_status",
    "purgatory_to_proto",
    "settings_from_proto",
    "signal_from_proto",
    "status_fields",
]

_ANY = ConditionSpec()


def condition_from_proto(field: str, msg: Any) -> ConditionSpec:
    kind = msg.WhichOneof("kind")
    if kind is None or kind == "any_key":
        return _ANY
    if kind == "all_keys":
        return ConditionSpec(ConditionKind.ALL_KEYS)
    if kind == "min_signals":
        m = msg.min_signals
        return ConditionSpec(
            ConditionKind.MIN_SIGNALS, count=m.count, distinct_sources=m.distinct_sources
        )
    if kind == "sum_at_least":
        return ConditionSpec(ConditionKind.SUM_AT_LEAST, threshold=msg.sum_at_least.threshold)
    if kind == "values_at_least":
        v = msg.values_at_least
        return ConditionSpec(
            ConditionKind.VALUES_AT_LEAST,
            targets=tuple(sorted(v.targets.items())),
            default_target=v.default_target,
        )
    raise InvalidArgument(field, f"unknown condition {kind!r}")  # pragma: no cover


def operation_request(prefix: str, msg: Any, limits: Limits) -> OperationRequest:
    """An OperationSpec or TryCompleteElseWatchRequest, validated; ``prefix`` for errors."""
    check_operation_id(f"{prefix}operation_id", msg.operation_id, limits)
    keys = check_keys(f"{prefix}keys", msg.keys, limits)
    check_timeout(f"{prefix}timeout_ms", msg.timeout_ms, limits)
    condition = condition_from_proto(f"{prefix}condition", msg.condition)
    check_condition(f"{prefix}condition", condition, keys, limits)
    check_payload(f"{prefix}payload", msg.payload, limits)
    return OperationRequest(
        msg.operation_id, OperationDefinition(keys, msg.timeout_ms, condition, msg.payload)
    )


def signal_from_proto(field: str, msg: Any, limits: Limits) -> SignalRecord:
    check_data(f"{field}.data", msg.data, limits)
    if len(msg.source) > limits.max_key_length:
        raise LimitExceeded(
            f"longer than max_key_length ({limits.max_key_length})", f"{field}.source"
        )
    return SignalRecord(
        amount=msg.amount,
        value=msg.value if msg.HasField("value") else None,
        source=msg.source,
        data=msg.data,
    )


def filter_from_proto(field: str, msg: Any) -> EventFilter:
    states: set[OperationState] = set()
    for i, raw in enumerate(msg.states):
        try:
            state = OperationState(raw)
        except ValueError:
            raise InvalidArgument(f"{field}.states[{i}]", f"unknown state {raw}") from None
        if state not in FINAL_STATES:
            raise InvalidArgument(f"{field}.states[{i}]", f"{state.name} is not a final state")
        states.add(state)
    return EventFilter(frozenset(states), frozenset(msg.keys), msg.operation_id_prefix)


def settings_from_proto(name: str, msg: Any) -> PurgatorySettings:
    """Requested settings; zero fields mean "server default" (filled by the registry)."""
    return PurgatorySettings(
        name=name,
        tick_ms=msg.tick_ms,
        wheel_size=msg.wheel_size,
        purge_interval=msg.purge_interval,
        max_pending=msg.max_pending,
        retained_events=msg.retained_events,
    )


_EMPTY_RESULT_PB = pb.OperationResult()


def result_to_proto(result: ResultSnapshot) -> Any:
    if not result.signal_count and not result.values:
        return _EMPTY_RESULT_PB
    return pb.OperationResult(
        signal_count=result.signal_count,
        sources=result.sources,
        signalled_keys=result.signalled_keys,
        amount_sum=result.amount_sum,
        values=dict(result.values),
        data=result.data,
        data_truncated=result.data_truncated,
    )


def status_fields(target: RemoteOperation | Outcome, created: bool) -> dict[str, Any]:
    """Keyword arguments shared by TryCompleteElseWatchResponse and OperationStatus.

    An operation is reported final only once its outcome is published (it has a
    sequence); until then it is WATCHING, so a caller never sees a final state that
    subscribers have not been offered yet.
    """
    outcome = target if isinstance(target, Outcome) else target.outcome
    if outcome is None:
        assert isinstance(target, RemoteOperation)
        return {
            "operation_id": target.operation_id,
            "state": OperationState.WATCHING,
            "created": created,
            "create_time_ms": target.create_time_ms,
            "due_time_ms": target.due_time_ms,
        }
    return {
        "operation_id": outcome.operation_id,
        "state": outcome.state,
        "result": result_to_proto(outcome.result),
        "sequence": outcome.sequence,
        "created": created,
        "create_time_ms": outcome.create_time_ms,
        "due_time_ms": outcome.due_time_ms,
        "complete_time_ms": outcome.complete_time_ms,
    }


def operation_status(target: RemoteOperation | Outcome, created: bool) -> Any:
    payload = target.payload if isinstance(target, Outcome) else target.definition.payload
    return pb.OperationStatus(payload=payload, **status_fields(target, created))


def event_to_proto(outcome: Outcome) -> Any:
    return pb.OperationEvent(
        sequence=outcome.sequence,
        purgatory=outcome.purgatory,
        operation_id=outcome.operation_id,
        state=cast(Any, outcome.state),
        keys=outcome.keys,
        payload=outcome.payload,
        result=result_to_proto(outcome.result),
        create_time_ms=outcome.create_time_ms,
        due_time_ms=outcome.due_time_ms,
        complete_time_ms=outcome.complete_time_ms,
    )


def purgatory_to_proto(stats: PurgatoryStats) -> Any:
    s = stats.settings
    return pb.Purgatory(
        name=stats.name,
        config=pb.PurgatoryConfig(
            tick_ms=s.tick_ms,
            wheel_size=s.wheel_size,
            purge_interval=s.purge_interval,
            max_pending=s.max_pending,
            retained_events=s.retained_events,
        ),
        pending=stats.pending,
        watched_keys=stats.watched_keys,
        last_sequence=stats.last_sequence,
        oldest_sequence=stats.oldest_sequence,
        subscribers=stats.subscribers,
    )
