"""Protobuf messages <-> the service's plain Python values.

The only module besides the servicer that knows the wire format. Inbound conversions
validate as they go (via :mod:`.validation`), so everything past this point can trust its
inputs; outbound ones build the response and event messages.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast, overload

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.conditions import (
    EMPTY_SIGNAL,
    ConditionKind,
    ConditionSpec,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.config import Limits, PurgatorySettings
from purgatory_server._service.errors import InvalidArgument
from purgatory_server._service.events import Outcome
from purgatory_server._service.named_purgatory import PurgatoryStats
from purgatory_server._service.operation import (
    OperationDefinition,
    OperationRequest,
    RemoteOperation,
)
from purgatory_server._service.states import FINAL_STATES, OperationState
from purgatory_server._service.subscriptions import EventFilter
from purgatory_server._service.validation import (
    check_condition,
    check_data,
    check_due_time,
    check_filter,
    check_key,
    check_keys,
    check_operation_id,
    check_payload,
    check_timeout,
)

__all__ = [
    "batch_status_response",
    "event_to_proto",
    "filter_from_proto",
    "operation_request",
    "operation_requests",
    "operation_status",
    "purgatory_to_proto",
    "settings_from_proto",
    "signal_from_proto",
    "signals_from_proto",
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


def _common_request(msg: Any, limits: Limits) -> OperationRequest | None:
    """The request for the common spec (no condition, keys and sizes within limits), or
    None when ``msg`` needs the full checks (:func:`_checked_request`).

    Why: almost every spec on the hot path is a plain long-poll; recognising it takes a
    few comparisons, while the full path builds a field name per check for messages it
    almost never needs. Everything accepted here the full path accepts identically.
    """
    keys = tuple(msg.keys)
    timeout = msg.timeout_ms
    payload = msg.payload
    op_id = msg.operation_id
    max_key = limits.max_key_length
    n = len(keys)
    if n == 1:  # the usual long-poll: no generator, no set
        keys_ok = 0 < len(keys[0]) <= max_key
    else:
        keys_ok = all(0 < len(k) <= max_key for k in keys) and len(set(keys)) == n
    if (
        keys_ok
        and n <= limits.max_keys_per_operation
        and limits.min_timeout_ms <= timeout <= limits.max_timeout_ms
        and len(op_id) <= limits.max_operation_id_length
        and len(payload) <= limits.max_payload_bytes
        and not msg.HasField("condition")
        and not msg.due_time_ms
    ):
        return OperationRequest(op_id, OperationDefinition(keys, timeout, _ANY, payload))
    return None


def _checked_request(prefix: str, msg: Any, limits: Limits) -> OperationRequest:
    check_operation_id(f"{prefix}operation_id", msg.operation_id, limits)
    keys = check_keys(f"{prefix}keys", msg.keys, limits)
    due = msg.due_time_ms
    if due:
        if msg.timeout_ms:
            raise InvalidArgument(f"{prefix}due_time_ms", "set timeout_ms or due_time_ms, not both")
        # The horizon is judged on the server's wall clock as the request arrives.
        check_due_time(f"{prefix}due_time_ms", due, limits, time.time_ns() // 1_000_000)
        condition = condition_from_proto(f"{prefix}condition", msg.condition)
        check_condition(f"{prefix}condition", condition, keys, limits)
        check_payload(f"{prefix}payload", msg.payload, limits)
        return OperationRequest(
            msg.operation_id, OperationDefinition(keys, 0, condition, msg.payload, due)
        )
    check_timeout(f"{prefix}timeout_ms", msg.timeout_ms, limits)
    condition = condition_from_proto(f"{prefix}condition", msg.condition)
    check_condition(f"{prefix}condition", condition, keys, limits)
    check_payload(f"{prefix}payload", msg.payload, limits)
    return OperationRequest(
        msg.operation_id, OperationDefinition(keys, msg.timeout_ms, condition, msg.payload)
    )


def operation_request(prefix: str, msg: Any, limits: Limits) -> OperationRequest:
    """An OperationSpec or TryCompleteElseWatchRequest, validated; ``prefix`` for errors."""
    return _common_request(msg, limits) or _checked_request(prefix, msg, limits)


class FieldPrefixes(Sequence[str]):
    """``field[i].`` for ``i`` in ``range(n)``, built only when indexed.

    Error messages name the offending element; building every name up front would cost
    a string per element of every batch, for the rare batch that is rejected.
    """

    __slots__ = ("_field", "_n")

    def __init__(self, field: str, n: int) -> None:
        self._field = field
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        if not -self._n <= index < self._n:
            raise IndexError(index)
        return f"{self._field}[{index % self._n}]."


def operation_requests(field: str, msgs: Sequence[Any], limits: Limits) -> list[OperationRequest]:
    """Every OperationSpec of a batch, validated (errors name ``field[i].…``).

    A field name is built only for a spec that needs the full checks (see
    :func:`_common_request`), not for every element of every batch.
    """
    out: list[OperationRequest] = []
    append = out.append
    for i, msg in enumerate(msgs):
        append(_common_request(msg, limits) or _checked_request(f"{field}[{i}].", msg, limits))
    return out


def signals_from_proto(
    field: str, msgs: Sequence[Any], limits: Limits
) -> list[tuple[str, SignalRecord]]:
    """Every KeySignal of a batch as (key, signal), validated (errors name ``field[i].…``).

    A KeySignal without a ``signal`` (a bare wake-up, the common case) maps to the shared
    :data:`EMPTY_SIGNAL`, which equals what :func:`signal_from_proto` builds for it.
    """
    max_key = limits.max_key_length
    out: list[tuple[str, SignalRecord]] = []
    append = out.append
    for i, item in enumerate(msgs):
        key = item.key
        if not 0 < len(key) <= max_key:
            check_key(f"{field}[{i}].key", key, limits)
        if item.HasField("signal"):
            append((key, signal_from_proto(f"{field}[{i}].signal", item.signal, limits)))
        else:
            append((key, EMPTY_SIGNAL))
    return out


def signal_from_proto(field: str, msg: Any, limits: Limits) -> SignalRecord:
    amount, source, data = msg.amount, msg.source, msg.data
    if not (amount or source or data or msg.HasField("value")):
        return EMPTY_SIGNAL  # a bare wake-up: equal to what the general path builds
    check_data(f"{field}.data", msg.data, limits)
    if len(msg.source) > limits.max_key_length:
        raise InvalidArgument(
            f"{field}.source",
            f"{len(msg.source)} characters exceed max_key_length ({limits.max_key_length})",
        )
    return SignalRecord(
        amount=msg.amount,
        value=msg.value if msg.HasField("value") else None,
        source=msg.source,
        data=msg.data,
    )


def filter_from_proto(field: str, msg: Any, limits: Limits) -> EventFilter:
    check_filter(field, msg.keys, msg.operation_id_prefix, limits)
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
        durable=msg.durable,
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


def result_fields(result: ResultSnapshot) -> dict[str, Any]:
    """An OperationResult as constructor keywords, non-default fields only.

    Protobuf builds a sub-message from a dict in place, while a message argument is built
    and then copied: on the batch response path (one result per operation) that copy was
    a third of the response's cost.
    """
    fields: dict[str, Any] = {}
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
    return fields


def status_fields(target: RemoteOperation | Outcome, created: bool) -> dict[str, Any]:
    """Keyword arguments shared by TryCompleteElseWatchResponse and OperationStatus.

    An operation is reported final only once its outcome is published (it has a
    sequence); until then it is WATCHING, so a caller never sees a final state that
    subscribers have not been offered yet.
    """
    if isinstance(target, RemoteOperation):
        return {
            "operation_id": target.operation_id,
            "state": OperationState.WATCHING,
            "created": created,
            "create_time_ms": target.create_time_ms,
            "due_time_ms": target.due_time_ms,
        }
    outcome = target
    return {
        "operation_id": outcome.operation_id,
        "state": outcome.state,
        "result": result_fields(outcome.result),
        "sequence": outcome.sequence,
        "created": created,
        "traceparent": outcome.traceparent,
        "create_time_ms": outcome.create_time_ms,
        "due_time_ms": outcome.due_time_ms,
        "complete_time_ms": outcome.complete_time_ms,
    }


def operation_status(target: RemoteOperation | Outcome, created: bool) -> Any:
    payload = target.payload if isinstance(target, Outcome) else target.definition.payload
    return pb.OperationStatus(payload=payload, **status_fields(target, created))


def operation_status_with_progress(target: RemoteOperation | Outcome) -> Any:
    """GetOperation's status: a WATCHING operation also shows its progress so far.

    Loop thread only: signals update an operation's progress on the loop, so the snapshot
    taken here is consistent. Only GetOperation pays for it (registration answers and
    batches stay as they are).
    """
    status = operation_status(target, False)
    if isinstance(target, RemoteOperation):
        progress = target.progress.snapshot()
        if progress.signal_count or progress.values:
            status.result.CopyFrom(result_to_proto(progress))
    return status


def batch_status_response(registered: Sequence[tuple[RemoteOperation | Outcome, bool]]) -> Any:
    """The BatchTryCompleteElseWatchResponse for ``registered``, in order.

    Statuses are added in place (``operations.add``) rather than built as messages and
    copied into the response.
    """
    response = pb.BatchTryCompleteElseWatchResponse()
    add = response.operations.add
    for target, created in registered:
        if isinstance(target, Outcome):
            add(payload=target.payload, **status_fields(target, created))
        else:
            add(payload=target.definition.payload, **status_fields(target, created))
    return response


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
        traceparent=outcome.traceparent,
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
            durable=s.durable,
        ),
        pending=stats.pending,
        watched_keys=stats.watched_keys,
        last_sequence=stats.last_sequence,
        oldest_sequence=stats.oldest_sequence,
        subscribers=stats.subscribers,
        incarnation=stats.incarnation,
    )
