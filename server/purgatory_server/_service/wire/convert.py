"""Protobuf messages <-> the service's plain Python values, typed both ways.

Outbound: responses, statuses and events built from operations and outcomes (the hot
path: keyword dicts, in-place ``add``). Inbound: the plain conversions (a condition, a
purgatory config); requests that need checking are converted by :mod:`.validation`,
which builds on these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict, TypeVar, cast

from google.protobuf import struct_pb2
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.core.snapshots import PurgatoryStats
from purgatory_server._service.model.conditions import (
    DEFAULT_CONDITION,
    EMPTY_RESULT,
    ConditionKind,
    ConditionSpec,
    Gate,
    ResultSnapshot,
)
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.struct_values import (
    attributes_from_struct,
    attributes_to_struct,
)

__all__ = [
    "add_event",
    "add_status",
    "batch_status_response",
    "condition_from_proto",
    "event_fields",
    "event_to_proto",
    "operation_status",
    "purgatory_to_proto",
    "result_fields",
    "set_result",
    "settings_from_proto",
    "status_fields",
    "status_response",
    "wire_state",
]


# Service states as the wire enum (the same numbers; see .states).
_StatusMessage = TypeVar("_StatusMessage", pb.TryCompleteElseWatchResponse, pb.OperationStatus)

_WIRE_STATES: dict[OperationState, pb.OperationState] = {
    state: cast(pb.OperationState, int(state)) for state in OperationState
}


_WIRE_WATCHING = _WIRE_STATES[OperationState.WATCHING]


def wire_state(state: OperationState) -> pb.OperationState:
    return _WIRE_STATES[state]


class ResultFields(TypedDict, total=False):
    """An OperationResult's constructor keywords (non-default fields only)."""

    signal_count: int
    sources: tuple[str, ...]
    signalled_keys: tuple[str, ...]
    amount_sum: int
    values: dict[str, int]
    data: bytes
    data_truncated: bool
    matched_key: str
    matched_attributes: struct_pb2.Struct


class StatusFields(TypedDict, total=False):
    """Keywords shared by TryCompleteElseWatchResponse and OperationStatus."""

    operation_id: str
    state: pb.OperationState
    result: ResultFields
    sequence: int
    created: bool
    traceparent: str
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int


class EventFields(TypedDict, total=False):
    """An OperationEvent's constructor keywords (non-default fields only)."""

    sequence: int
    purgatory: str
    operation_id: str
    state: pb.OperationState
    keys: tuple[str, ...]
    payload: bytes
    result: ResultFields
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    traceparent: str


def condition_from_proto(field: str, msg: pb.Condition) -> ConditionSpec:
    """The condition ``msg`` spells, with its gate (expressions, ``match``, attributes)
    if it has one; the checks are :func:`~.field_rules.check_condition`'s."""
    spec = _kind_from_proto(field, msg)
    has_attributes = msg.HasField("attributes")
    text, predicate, match = msg.filter, msg.predicate, msg.match
    if text or predicate or match or has_attributes:
        attributes = attributes_from_struct(msg.attributes) if has_attributes else None
        return ConditionSpec(
            spec.kind,
            spec.count,
            spec.distinct_sources,
            spec.threshold,
            spec.targets,
            spec.default_target,
            Gate(text, predicate, match, attributes),
        )
    return spec


def _kind_from_proto(field: str, msg: pb.Condition) -> ConditionSpec:
    kind = msg.WhichOneof("kind")
    if kind is None or kind == "any_key":
        return DEFAULT_CONDITION
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


def condition_to_proto(spec: ConditionSpec) -> pb.Condition:
    """The inverse of :func:`condition_from_proto` (the journal spells conditions so too)."""
    msg = _kind_to_proto(spec)
    gate = spec.gate
    if gate is not None:
        msg.filter = gate.filter
        msg.predicate = gate.predicate
        msg.match = gate.match
        if gate.attributes is not None:
            msg.attributes.CopyFrom(attributes_to_struct(gate.attributes))
    return msg


def _kind_to_proto(spec: ConditionSpec) -> pb.Condition:
    kind = spec.kind
    if kind is ConditionKind.ANY_KEY:
        return pb.Condition(any_key=pb.AnyKeyCondition())
    if kind is ConditionKind.ALL_KEYS:
        return pb.Condition(all_keys=pb.AllKeysCondition())
    if kind is ConditionKind.MIN_SIGNALS:
        return pb.Condition(
            min_signals=pb.MinSignalsCondition(
                count=spec.count, distinct_sources=spec.distinct_sources
            )
        )
    if kind is ConditionKind.SUM_AT_LEAST:
        return pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=spec.threshold))
    return pb.Condition(
        values_at_least=pb.ValuesAtLeastCondition(
            targets=dict(spec.targets), default_target=spec.default_target
        )
    )


def settings_from_proto(name: str, msg: pb.PurgatoryConfig) -> PurgatorySettings:
    """Requested settings; zero fields mean "server default" (filled by the registry)."""
    return PurgatorySettings.from_wire(name, msg)


_EMPTY_RESULT_PB = pb.OperationResult()


def result_to_proto(result: ResultSnapshot) -> pb.OperationResult:
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
        matched_key=result.matched_key,
        matched_attributes=None if result.matched is None else attributes_to_struct(result.matched),
    )


def result_fields(result: ResultSnapshot) -> ResultFields:
    """An OperationResult as constructor keywords, non-default fields only.

    Protobuf builds a sub-message from a dict in place; a message argument is built and
    then copied.
    """
    fields: ResultFields = {}
    if result.signal_count:
        fields["signal_count"] = result.signal_count
    if result.sources:
        fields["sources"] = result.sources
    if result.signalled_keys:
        fields["signalled_keys"] = result.signalled_keys
    if result.amount_sum:
        fields["amount_sum"] = result.amount_sum
    if result.values:
        fields["values"] = dict(result.values)
    if result.data:
        fields["data"] = result.data
    if result.data_truncated:
        fields["data_truncated"] = True
    if result.matched_key:
        fields["matched_key"] = result.matched_key
    if result.matched is not None:
        fields["matched_attributes"] = attributes_to_struct(result.matched)
    return fields


def status_fields(target: RemoteOperation | Outcome, created: bool) -> StatusFields:
    """Keyword arguments shared by TryCompleteElseWatchResponse and OperationStatus.

    An operation is reported final only once its outcome is published (it has a
    sequence); until then it is WATCHING, so a caller never sees a final state that
    subscribers have not been offered yet.
    """
    # isinstance against the Outcome tuple: RemoteOperation is an ABC, slower to test.
    if not isinstance(target, Outcome):
        return {
            "operation_id": target.operation_id,
            "state": _WIRE_WATCHING,
            "created": created,
            "traceparent": target.traceparent,
            "create_time_ms": target.create_time_ms,
            "due_time_ms": target.due_time_ms,
        }
    outcome = target
    return {
        "operation_id": outcome.operation_id,
        "state": _WIRE_STATES[outcome.state],
        "result": result_fields(outcome.result),
        "sequence": outcome.sequence,
        "created": created,
        "traceparent": outcome.traceparent,
        "create_time_ms": outcome.create_time_ms,
        "due_time_ms": outcome.due_time_ms,
        "complete_time_ms": outcome.complete_time_ms,
    }


def status_response(
    target: RemoteOperation | Outcome, created: bool
) -> pb.TryCompleteElseWatchResponse:
    """``TryCompleteElseWatchResponse(**status_fields(target, created))``, with an
    outcome's result set in place (see :func:`add_status`)."""
    return _status_message(pb.TryCompleteElseWatchResponse, target, created)


def operation_status(target: RemoteOperation | Outcome, created: bool) -> pb.OperationStatus:
    payload = target.payload if isinstance(target, Outcome) else target.definition.payload
    return pb.OperationStatus(payload=payload, **status_fields(target, created))


def operation_status_with_progress(target: RemoteOperation | Outcome) -> pb.OperationStatus:
    """GetOperation's status: a WATCHING operation also shows its progress so far.

    Loop thread only: signals update an operation's progress on the loop, so the snapshot
    taken here is consistent.
    """
    status = operation_status(target, False)
    if not isinstance(target, Outcome):
        progress = target.progress.snapshot()
        if progress.signal_count or progress.values:
            status.result.CopyFrom(result_to_proto(progress))
    return status


def batch_status_response(
    registered: Sequence[tuple[RemoteOperation | Outcome, bool]],
) -> pb.BatchTryCompleteElseWatchResponse:
    """The BatchTryCompleteElseWatchResponse for ``registered``, in order (statuses added
    in place)."""
    response = pb.BatchTryCompleteElseWatchResponse()
    add = response.operations.add
    for target, created in registered:
        add_status(add, target, created)
    return response


def add_status(
    add: Callable[..., pb.OperationStatus], target: RemoteOperation | Outcome, created: bool
) -> pb.OperationStatus:
    """``add(**status_fields(target, created))``, cheaper (see :func:`add_event`).

    A registration's answer, so without the payload, as TryCompleteElseWatchResponse
    (which has no such field): the caller sent it and keeps it (docs/benchmarks.md,
    "Registration answers and watch entries").
    """
    return _status_message(add, target, created)


def _status_message(
    make: Callable[..., _StatusMessage],
    target: RemoteOperation | Outcome,
    created: bool,
    **payload: bytes,
) -> _StatusMessage:
    """``make(**status_fields(target, created), **payload)`` with keywords and the
    outcome's result set in place: the hot path's form of :func:`status_fields`."""
    if not isinstance(target, Outcome):
        return make(
            operation_id=target.operation_id,
            state=_WIRE_WATCHING,
            created=created,
            traceparent=target.traceparent,
            create_time_ms=target.create_time_ms,
            due_time_ms=target.due_time_ms,
            **payload,
        )
    status = make(
        operation_id=target.operation_id,
        state=_WIRE_STATES[target.state],
        sequence=target.sequence,
        created=created,
        traceparent=target.traceparent,
        create_time_ms=target.create_time_ms,
        due_time_ms=target.due_time_ms,
        complete_time_ms=target.complete_time_ms,
        **payload,
    )
    into = status.result
    into.SetInParent()  # present even when empty, as status_fields() makes it
    result = target.result
    if result is not EMPTY_RESULT:
        set_result(into, result)
    return status


def event_fields(outcome: Outcome) -> EventFields:
    """An OperationEvent as constructor keywords (see :func:`result_fields` for why)."""
    fields: EventFields = {
        "sequence": outcome.sequence,
        "purgatory": outcome.purgatory,
        "operation_id": outcome.operation_id,
        "state": _WIRE_STATES[outcome.state],
        "keys": outcome.keys,
        "create_time_ms": outcome.create_time_ms,
        "due_time_ms": outcome.due_time_ms,
        "complete_time_ms": outcome.complete_time_ms,
        "traceparent": outcome.traceparent,
    }
    if outcome.payload:
        fields["payload"] = outcome.payload
    result = result_fields(outcome.result)
    if result:
        fields["result"] = result
    return fields


def add_event(add: Callable[..., pb.OperationEvent], outcome: Outcome) -> None:
    """``add(**event_fields(outcome))`` for a repeated OperationEvent field, cheaper.

    The scalars go in as keywords (no dict per event) and the result's fields are set
    on the sub-message in place rather than through a nested dict.
    """
    event = add(
        sequence=outcome.sequence,
        purgatory=outcome.purgatory,
        operation_id=outcome.operation_id,
        state=_WIRE_STATES[outcome.state],
        keys=outcome.keys,
        payload=outcome.payload,
        create_time_ms=outcome.create_time_ms,
        due_time_ms=outcome.due_time_ms,
        complete_time_ms=outcome.complete_time_ms,
        traceparent=outcome.traceparent,  # as on Subscribe (event_to_proto)
    )
    result = outcome.result
    if result is not EMPTY_RESULT:
        set_result(event.result, result)


def set_result(into: pb.OperationResult, result: ResultSnapshot) -> None:
    """Set ``result``'s non-default fields on ``into`` (a sub-message, in place)."""
    if result.signal_count:
        into.signal_count = result.signal_count
    if result.sources:
        into.sources.extend(result.sources)
    if result.signalled_keys:
        into.signalled_keys.extend(result.signalled_keys)
    if result.amount_sum:
        into.amount_sum = result.amount_sum
    if result.values:
        into.values.update(result.values)
    if result.data:
        into.data = result.data
    if result.data_truncated:
        into.data_truncated = True
    if result.matched_key:
        into.matched_key = result.matched_key
        if result.matched is not None:
            into.matched_attributes.CopyFrom(attributes_to_struct(result.matched))


def event_to_proto(outcome: Outcome) -> pb.OperationEvent:
    return pb.OperationEvent(
        sequence=outcome.sequence,
        purgatory=outcome.purgatory,
        operation_id=outcome.operation_id,
        state=_WIRE_STATES[outcome.state],
        keys=outcome.keys,
        payload=outcome.payload,
        result=result_to_proto(outcome.result),
        create_time_ms=outcome.create_time_ms,
        due_time_ms=outcome.due_time_ms,
        complete_time_ms=outcome.complete_time_ms,
        traceparent=outcome.traceparent,
    )


def purgatory_to_proto(stats: PurgatoryStats) -> pb.Purgatory:
    s = stats.settings
    return pb.Purgatory(
        name=stats.name,
        config=s.to_wire(pb.PurgatoryConfig()),
        pending=stats.pending,
        watched_keys=stats.watched_keys,
        last_sequence=stats.last_sequence,
        oldest_sequence=stats.oldest_sequence,
        subscribers=stats.subscribers,
        incarnation=stats.incarnation,
    )
