"""The ``check_*`` rules on plain values: one rule per kind of field, each raising
:class:`~..model.errors.InvalidArgument` that names the field it was given.

The same rules apply to a request on the wire (:mod:`.validation`), a schedule's stored
definition (``schedules.definition``) and a Session frame; each caller builds the field
name its user will recognise.
Pure: no I/O, no state; the limits are passed in, never read from a global.
"""

from __future__ import annotations

from collections.abc import Sequence

from purgatory_server._service.config.server_config import Limits, PurgatorySettings, setting_bounds
from purgatory_server._service.model.attributes import Attributes
from purgatory_server._service.model.conditions import ConditionKind, ConditionSpec, Gate
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.expressions import check as check_expression
from purgatory_server._service.model.quoting import quote

__all__ = [
    "check_attributes",
    "check_batch",
    "check_condition",
    "check_data",
    "check_due_time",
    "check_filter",
    "check_key",
    "check_keys",
    "check_operation_id",
    "check_payload",
    "check_settings",
    "check_timeout",
]


def check_key(field: str, key: str, limits: Limits) -> None:
    if not key:
        raise InvalidArgument(field, "must not be empty")
    if len(key) > limits.max_key_length:
        raise InvalidArgument(
            field, f"{len(key)} characters exceed max_key_length ({limits.max_key_length})"
        )


def check_keys(field: str, keys: Sequence[str], limits: Limits) -> tuple[str, ...]:
    if len(keys) > limits.max_keys_per_operation:
        raise InvalidArgument(
            field,
            f"{len(keys)} keys exceed max_keys_per_operation ({limits.max_keys_per_operation})",
        )
    seen: set[str] = set()
    for i, key in enumerate(keys):
        check_key(f"{field}[{i}]", key, limits)
        if key in seen:
            raise InvalidArgument(f"{field}[{i}]", f"duplicate key {quote(key)}")
        seen.add(key)
    return tuple(keys)


def check_operation_id(field: str, operation_id: str, limits: Limits) -> None:
    if len(operation_id) > limits.max_operation_id_length:
        raise InvalidArgument(
            field,
            f"{len(operation_id)} characters exceed max_operation_id_length "
            f"({limits.max_operation_id_length})",
        )


def check_payload(field: str, payload: bytes, limits: Limits) -> None:
    if len(payload) > limits.max_payload_bytes:
        raise InvalidArgument(
            field, f"{len(payload)} bytes exceed max_payload_bytes ({limits.max_payload_bytes})"
        )


def check_data(field: str, data: bytes, limits: Limits) -> None:
    if len(data) > limits.max_signal_data_bytes:
        raise InvalidArgument(
            field,
            f"{len(data)} bytes exceed max_signal_data_bytes ({limits.max_signal_data_bytes})",
        )


def check_timeout(field: str, timeout_ms: int, limits: Limits) -> None:
    if not limits.min_timeout_ms <= timeout_ms <= limits.max_timeout_ms:
        raise InvalidArgument(
            field,
            f"{timeout_ms} is outside [{limits.min_timeout_ms}, {limits.max_timeout_ms}] ms",
        )


def check_due_time(field: str, due_time_ms: int, limits: Limits, now_ms: int) -> int:
    """An absolute deadline (epoch ms) -> the timeout it means at ``now_ms`` (server clock).

    A due time already past means "at once" (the smallest timeout); one further ahead than
    ``limits.max_timeout_ms`` (the maximum horizon) is refused.
    """
    if due_time_ms <= 0:
        raise InvalidArgument(field, "must be a positive Unix epoch time in milliseconds")
    timeout = due_time_ms - now_ms
    if timeout > limits.max_timeout_ms:
        raise InvalidArgument(
            field,
            f"{due_time_ms} is {timeout} ms ahead of the server's clock; the maximum "
            f"horizon is {limits.max_timeout_ms} ms",
        )
    return max(limits.min_timeout_ms, timeout)


def check_batch(field: str, size: int, limits: Limits) -> None:
    if size == 0:
        raise InvalidArgument(field, "must not be empty")
    if size > limits.max_batch_size:
        raise InvalidArgument(
            field, f"{size} entries exceed max_batch_size ({limits.max_batch_size})"
        )


def check_condition(field: str, spec: ConditionSpec, keys: Sequence[str], limits: Limits) -> None:
    kind = spec.kind
    if kind is not ConditionKind.ANY_KEY and not keys:
        raise InvalidArgument(field, f"{kind.value} needs at least one key")
    if kind is ConditionKind.MIN_SIGNALS:
        if spec.count <= 0:
            raise InvalidArgument(f"{field}.min_signals.count", "must be positive")
        if spec.distinct_sources and spec.count > limits.max_result_sources:
            raise InvalidArgument(
                f"{field}.min_signals.count",
                f"{spec.count} distinct sources exceed max_result_sources "
                f"({limits.max_result_sources})",
            )
    if spec.gate is not None:
        check_gate(field, spec.gate, limits)
    if kind is ConditionKind.VALUES_AT_LEAST:
        known = set(keys)
        for key, _ in spec.targets:
            if key not in known:
                raise InvalidArgument(
                    f"{field}.values_at_least.targets", f"{quote(key)} is not one of the keys"
                )


def check_attributes(field: str, attributes: Attributes, limits: Limits) -> None:
    """A signal's or an operation's attributes: at most max_attributes_bytes encoded."""
    if len(attributes.raw) > limits.max_attributes_bytes:
        raise InvalidArgument(
            field,
            f"{len(attributes.raw)} bytes exceed max_attributes_bytes "
            f"({limits.max_attributes_bytes})",
        )


def check_gate(field: str, gate: Gate, limits: Limits) -> None:
    """A condition's expressions and attributes (docs/conditions.md): each expression
    compiles within the cost limit and types on a probe; ``match`` names an attribute
    the operation has."""
    if gate.attributes is not None:
        check_attributes(f"{field}.attributes", gate.attributes, limits)
    if gate.match:
        path = gate.match.split(".")
        if len(gate.match) > limits.max_key_length or "" in path:
            raise InvalidArgument(
                f"{field}.match", f"{quote(gate.match)} is not a dotted attribute path"
            )
        if gate.attributes is None or gate.attributes.canonical_at(path) is None:
            raise InvalidArgument(
                f"{field}.match",
                f"the operation's attributes have no {quote(gate.match)} (set {field}.attributes)",
            )
    length = limits.max_expression_length
    if gate.filter:
        check_expression(f"{field}.filter", gate.filter, length, "filter")
    if gate.predicate:
        check_expression(f"{field}.predicate", gate.predicate, length, "predicate")


def check_filter(field: str, keys: Sequence[str], operation_id_prefix: str, limits: Limits) -> None:
    """A SubscribeFilter's keys and prefix (its states are checked where converted)."""
    if len(keys) > limits.max_keys_per_operation:
        raise InvalidArgument(
            f"{field}.keys",
            f"{len(keys)} keys exceed max_keys_per_operation ({limits.max_keys_per_operation})",
        )
    for i, key in enumerate(keys):
        check_key(f"{field}.keys[{i}]", key, limits)
    check_operation_id(f"{field}.operation_id_prefix", operation_id_prefix, limits)


def check_settings(field: str, requested: PurgatorySettings, limits: Limits) -> None:
    """CreatePurgatory's config: each non-zero (zero: the server default) within bounds.

    Unbounded, ``wheel_size = 4294967295`` would allocate billions of buckets on the
    event loop (the whole server hangs) and ``wheel_size = 1`` fails inside the engine.
    """
    for name, (low, high) in setting_bounds(limits).items():
        value = getattr(requested, name)
        if value and not low <= value <= high:
            raise InvalidArgument(f"{field}.{name}", f"{value} is outside [{low}, {high}]")
