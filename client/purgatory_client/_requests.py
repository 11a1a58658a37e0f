"""Requests with no I/O: every client call's protobuf request, built and checked here.

The clients only *perform* calls (blocking or awaited); what goes on the wire is decided
here once, so the two cannot drift apart. Each check names the argument it refused
(:class:`~purgatory_client.InvalidArgumentError`, before anything is sent); the fast paths
build the message directly and fall back to the checks only when protobuf refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from google.protobuf.descriptor import FieldDescriptor
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._checks import converting, int64, key_list, text, uint
from purgatory_client._long_poll import new_operation_id
from purgatory_client._models import (
    CONFIG_FIELDS,
    Condition,
    ConditionKind,
    OperationSpec,
    OperationState,
    PurgatoryConfig,
    Signal,
)
from purgatory_client.errors import InvalidArgumentError, invalid_argument

__all__ = [
    "DEFAULT_PURGATORY",
    "batch_signal_request",
    "batch_specs",
    "batch_watch_request",
    "cancel_request",
    "condition_to_proto",
    "config_to_proto",
    "name_field",
    "reschedule_request",
    "signal_request",
    "signal_to_proto",
    "subscribe_request",
    "watch_request",
]

DEFAULT_PURGATORY = "default"


def condition_to_proto(condition: Condition | None, field: str = "condition") -> Any:
    msg = _kind_to_proto(condition, field)
    if condition is not None and (
        condition.filter or condition.predicate or condition.match or condition.attributes
    ):
        msg.filter = text(f"{field}.filter", condition.filter)
        msg.predicate = text(f"{field}.predicate", condition.predicate)
        msg.match = text(f"{field}.match", condition.match)
        if condition.attributes is not None:
            _set_struct(msg.attributes, condition.attributes, f"{field}.attributes")
    return msg


def _set_struct(into: Any, attributes: Mapping[str, Any], field: str) -> None:
    """Fill a google.protobuf.Struct from a JSON object (a mapping of JSON values)."""
    if not isinstance(attributes, Mapping):
        raise invalid_argument(field, f"expected a mapping, got {type(attributes).__name__}")
    try:
        into.update(attributes)
    except (TypeError, ValueError) as exc:
        raise invalid_argument(field, f"not a JSON object: {exc}") from None


def _kind_to_proto(condition: Condition | None, field: str) -> Any:
    if condition is not None and not isinstance(condition, Condition):
        raise invalid_argument(field, f"expected a Condition, got {type(condition).__name__}")
    if condition is None or condition.kind is ConditionKind.ANY_KEY:
        return pb.Condition(any_key=pb.AnyKeyCondition())
    kind = condition.kind
    if kind is ConditionKind.ALL_KEYS:
        return pb.Condition(all_keys=pb.AllKeysCondition())
    if kind is ConditionKind.MIN_SIGNALS:
        return pb.Condition(
            min_signals=pb.MinSignalsCondition(
                count=uint(f"{field}.count", condition.count, 32),
                distinct_sources=condition.distinct_sources,
            )
        )
    if kind is ConditionKind.SUM_AT_LEAST:
        threshold = int64(f"{field}.threshold", condition.threshold)
        return pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=threshold))
    targets = {
        text(f"{field}.targets", k): int64(f"{field}.targets[{k[:50]!r}]", v)
        for k, v in condition.targets.items()
    }
    return pb.Condition(
        values_at_least=pb.ValuesAtLeastCondition(
            targets=targets,
            default_target=int64(f"{field}.default_target", condition.default_target),
        )
    )


def signal_to_proto(signal: Signal | None, field: str = "signal") -> Any:
    if signal is None:
        return pb.Signal()
    if not isinstance(signal, Signal):
        raise invalid_argument(field, f"expected a Signal, got {type(signal).__name__}")
    with converting(field):
        msg = pb.Signal(
            amount=int64(f"{field}.amount", signal.amount),
            source=text(f"{field}.source", signal.source),
            data=signal.data,
        )
        if signal.value is not None:
            msg.value = int64(f"{field}.value", signal.value)
        if signal.attributes is not None:
            _set_struct(msg.attributes, signal.attributes, f"{field}.attributes")
    return msg


def _checked_watch(
    purgatory: Any, keys: Any, timeout_ms: Any, condition: Any, operation_id: Any
) -> None:
    """Raise the precise InvalidArgumentError for a watch the fast path refused."""
    text("purgatory", purgatory)
    text("operation_id", operation_id)
    key_list("keys", keys)
    uint("timeout_ms", timeout_ms)
    condition_to_proto(condition)


def watch_request(
    purgatory: str,
    *,
    keys: Sequence[str],
    timeout_ms: int,
    condition: Condition | None,
    payload: bytes,
    operation_id: str,
    wait: bool,
    due_time_ms: int = 0,
    extend_on_resend: bool = False,
    max_extend_ms: int = 0,
) -> Any:
    # Fast path: build directly and let protobuf refuse wrong types and ranges; only then
    # (or for a bare str, which protobuf would split into one key per character) run the
    # checks that name the argument.
    operation_id = operation_id or new_operation_id()
    if not isinstance(keys, str | bytes):
        try:
            return pb.TryCompleteElseWatchRequest(
                purgatory=purgatory,
                operation_id=operation_id,
                keys=list(keys),
                timeout_ms=timeout_ms,
                condition=condition_to_proto(condition),
                payload=payload,
                wait=wait,
                due_time_ms=due_time_ms,
                extend_on_resend=extend_on_resend,
                max_extend_ms=max_extend_ms,
            )
        except (TypeError, ValueError, InvalidArgumentError):
            pass
    _checked_watch(purgatory, keys, timeout_ms, condition, operation_id)
    with converting("request"):  # what the checks let through but protobuf still refuses
        return pb.TryCompleteElseWatchRequest(
            purgatory=purgatory,
            operation_id=operation_id,
            keys=keys,
            timeout_ms=timeout_ms,
            condition=condition_to_proto(condition),
            payload=payload,
            wait=wait,
            due_time_ms=uint("due_time_ms", due_time_ms),
            extend_on_resend=extend_on_resend,
            max_extend_ms=uint("max_extend_ms", max_extend_ms),
        )


def _spec(index: int, s: Any) -> Any:
    """One OperationSpec; errors name ``operations[index]....`` (built only on error)."""
    if type(s) is OperationSpec and not isinstance(s.keys, str | bytes):
        try:
            return pb.OperationSpec(
                operation_id=s.operation_id or new_operation_id(),
                keys=list(s.keys),
                timeout_ms=s.timeout_ms,
                condition=condition_to_proto(s.condition),
                payload=s.payload,
                due_time_ms=s.due_time_ms,
                extend_on_resend=s.extend_on_resend,
                max_extend_ms=s.max_extend_ms,
            )
        except (TypeError, ValueError, InvalidArgumentError):
            pass
    field = f"operations[{index}]"
    if not isinstance(s, OperationSpec):
        raise invalid_argument(field, f"expected an OperationSpec, got {type(s).__name__}")
    text(f"{field}.operation_id", s.operation_id)
    key_list(f"{field}.keys", s.keys)
    uint(f"{field}.timeout_ms", s.timeout_ms)
    condition = condition_to_proto(s.condition, f"{field}.condition")
    with converting(field):
        return pb.OperationSpec(
            operation_id=s.operation_id or new_operation_id(),
            keys=s.keys,
            timeout_ms=s.timeout_ms,
            condition=condition,
            payload=s.payload,
            due_time_ms=uint(f"{field}.due_time_ms", s.due_time_ms),
            extend_on_resend=s.extend_on_resend,
            max_extend_ms=uint(f"{field}.max_extend_ms", s.max_extend_ms),
        )


def batch_specs(specs: Iterable[OperationSpec]) -> tuple[OperationSpec, ...]:
    """A batch's specs read once: the request is built from them and the answer's
    payloads come from them (the server does not echo them back)."""
    if isinstance(specs, OperationSpec):
        raise invalid_argument("operations", "expected a list of OperationSpec, got one")
    return tuple(specs)


def batch_watch_request(purgatory: str, specs: Sequence[OperationSpec], wait: bool) -> Any:
    return pb.BatchTryCompleteElseWatchRequest(
        purgatory=text("purgatory", purgatory),
        wait=wait,
        operations=[_spec(i, s) for i, s in enumerate(specs)],
    )


def signal_request(purgatory: str, key: str, signal: Signal | None) -> Any:
    return pb.CheckAndCompleteRequest(
        purgatory=text("purgatory", purgatory), key=text("key", key), signal=signal_to_proto(signal)
    )


def _key_signal(index: int, entry: Any) -> Any:
    """One KeySignal of a batch; errors name ``signals[index]...`` (built only on error)."""
    if type(entry) is str:
        return pb.KeySignal(key=entry, signal=_EMPTY_SIGNAL)
    if isinstance(entry, tuple) and len(entry) == 2:
        key, signal = entry
        if type(key) is str:
            return pb.KeySignal(key=key, signal=signal_to_proto(signal, f"signals[{index}].signal"))
        raise invalid_argument(f"signals[{index}].key", f"expected str, got {type(key).__name__}")
    raise invalid_argument(f"signals[{index}]", "expected a key or a (key, Signal) pair")


_EMPTY_SIGNAL = pb.Signal()


def batch_signal_request(purgatory: str, signals: Iterable[tuple[str, Signal | None] | str]) -> Any:
    if isinstance(signals, str | bytes):
        raise invalid_argument(
            "signals", "expected a list of keys or (key, Signal) pairs, got a str"
        )
    return pb.BatchCheckAndCompleteRequest(
        purgatory=text("purgatory", purgatory),
        signals=[_key_signal(i, entry) for i, entry in enumerate(signals)],
    )


# The wire form of each PurgatoryConfig field, from the proto's descriptor: the client
# declares the fields (typed, documented) and the mapping follows from the names.
# tests/service/test_settings_spec.py fails when the two (or the server) disagree.
_CONFIG_WIRE = pb.PurgatoryConfig.DESCRIPTOR.fields_by_name
_UINT_BITS = {
    FieldDescriptor.TYPE_UINT32: 32,
    FieldDescriptor.TYPE_UINT64: 64,
}


def config_to_proto(config: PurgatoryConfig | None) -> Any:
    c = config or PurgatoryConfig()
    msg = pb.PurgatoryConfig()
    for name in CONFIG_FIELDS:
        value = getattr(c, name)
        wire_type = _CONFIG_WIRE[name].type
        if wire_type == FieldDescriptor.TYPE_BOOL:
            value = bool(value)
        else:
            value = uint(f"config.{name}", value, _UINT_BITS[wire_type])
        setattr(msg, name, value)
    return msg


def name_field(field: str, value: str) -> str:
    """A purgatory name or operation id argument, type-checked."""
    return text(field, value)


def subscribe_request(
    purgatory: str,
    after_sequence: int | None,
    states: Iterable[OperationState],
    keys: Iterable[str],
    operation_id_prefix: str,
    *,
    incarnation: str | None = None,
    heartbeat_interval_ms: int = 0,
) -> Any:
    with converting("filter"):
        request = pb.SubscribeRequest(
            purgatory=text("purgatory", purgatory),
            incarnation=text("incarnation", incarnation or ""),
            filter=pb.SubscribeFilter(
                states=cast(Any, [int(s) for s in states]),
                keys=key_list("keys", keys),
                operation_id_prefix=text("operation_id_prefix", operation_id_prefix),
            ),
        )
    if after_sequence is not None:
        request.after_sequence = uint("after_sequence", after_sequence)
    if heartbeat_interval_ms:
        request.heartbeat_interval_ms = uint("heartbeat_interval_ms", heartbeat_interval_ms)
    return request


def cancel_request(
    purgatory: str, operation_ids: Iterable[str] | None, key: str | None, prefix: str | None
) -> Any:
    """One of ids, key or prefix (InvalidArgumentError naming ``target`` otherwise)."""
    given = [x is not None for x in (operation_ids, key, prefix)]
    if sum(given) != 1:
        raise invalid_argument("target", "give exactly one of operation_ids, key or prefix")
    request = pb.CancelRequest(purgatory=text("purgatory", purgatory))
    if operation_ids is not None:
        request.operation_ids.ids.extend(key_list("operation_ids", operation_ids))
    elif key is not None:
        request.key = text("key", key)
    else:
        request.operation_id_prefix = text("prefix", prefix)
    return request


def reschedule_request(
    purgatory: str, operation_id: str, timeout_ms: int | None, due_time_ms: int | None
) -> Any:
    if (timeout_ms is None) == (due_time_ms is None):
        raise invalid_argument("deadline", "give exactly one of timeout_ms or due_time_ms")
    request = pb.RescheduleRequest(
        purgatory=text("purgatory", purgatory), operation_id=text("operation_id", operation_id)
    )
    if timeout_ms is not None:
        request.timeout_ms = uint("timeout_ms", timeout_ms)
    else:
        request.due_time_ms = uint("due_time_ms", due_time_ms)
    return request
