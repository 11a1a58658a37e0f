"""Request validation: malformed values are INVALID_ARGUMENT, configured limits are
RESOURCE_EXHAUSTED; both name the offending field (``operations[2].keys[0]``).

Every function is pure (no I/O, no state), so the rules are testable on their own and the
same checks apply to the single and the batch forms of an RPC.
"""

from __future__ import annotations

from collections.abc import Sequence

from purgatory_server._service.conditions import ConditionKind, ConditionSpec
from purgatory_server._service.config import Limits
from purgatory_server._service.errors import InvalidArgument, LimitExceeded

__all__ = [
    "check_batch",
    "check_condition",
    "check_data",
    "check_key",
    "check_keys",
    "check_operation_id",
    "check_payload",
    "check_timeout",
]


def check_key(field: str, key: str, limits: Limits) -> None:
    if not key:
        raise InvalidArgument(field, "must not be empty")
    if len(key) > limits.max_key_length:
        raise LimitExceeded(f"longer than max_key_length ({limits.max_key_length})", field)


def check_keys(field: str, keys: Sequence[str], limits: Limits) -> tuple[str, ...]:
    if len(keys) > limits.max_keys_per_operation:
        raise LimitExceeded(
            f"{len(keys)} keys exceed max_keys_per_operation ({limits.max_keys_per_operation})",
            field,
        )
    seen: set[str] = set()
    for i, key in enumerate(keys):
        check_key(f"{field}[{i}]", key, limits)
        if key in seen:
            raise InvalidArgument(f"{field}[{i}]", f"duplicate key {key!r}")
        seen.add(key)
    return tuple(keys)


def check_operation_id(field: str, operation_id: str, limits: Limits) -> None:
    if len(operation_id) > limits.max_operation_id_length:
        raise LimitExceeded(
            f"longer than max_operation_id_length ({limits.max_operation_id_length})", field
        )


def check_payload(field: str, payload: bytes, limits: Limits) -> None:
    if len(payload) > limits.max_payload_bytes:
        raise LimitExceeded(
            f"{len(payload)} bytes exceed max_payload_bytes ({limits.max_payload_bytes})", field
        )


def check_data(field: str, data: bytes, limits: Limits) -> None:
    if len(data) > limits.max_signal_data_bytes:
        raise LimitExceeded(
            f"{len(data)} bytes exceed max_signal_data_bytes ({limits.max_signal_data_bytes})",
            field,
        )


def check_timeout(field: str, timeout_ms: int, limits: Limits) -> None:
    if not limits.min_timeout_ms <= timeout_ms <= limits.max_timeout_ms:
        raise LimitExceeded(
            f"{timeout_ms} is outside [{limits.min_timeout_ms}, {limits.max_timeout_ms}] ms",
            field,
        )


def check_batch(field: str, size: int, limits: Limits) -> None:
    if size == 0:
        raise InvalidArgument(field, "must not be empty")
    if size > limits.max_batch_size:
        raise LimitExceeded(
            f"{size} entries exceed max_batch_size ({limits.max_batch_size})", field
        )


def check_condition(field: str, spec: ConditionSpec, keys: Sequence[str], limits: Limits) -> None:
    kind = spec.kind
    if kind is not ConditionKind.ANY_KEY and not keys:
        raise InvalidArgument(field, f"{kind.value} needs at least one key")
    if kind is ConditionKind.MIN_SIGNALS:
        if spec.count <= 0:
            raise InvalidArgument(f"{field}.min_signals.count", "must be positive")
        if spec.distinct_sources and spec.count > limits.max_result_sources:
            raise LimitExceeded(
                f"{spec.count} distinct sources exceed max_result_sources "
                f"({limits.max_result_sources})",
                f"{field}.min_signals.count",
            )
    if kind is ConditionKind.VALUES_AT_LEAST:
        known = set(keys)
        for key, _ in spec.targets:
            if key not in known:
                raise InvalidArgument(
                    f"{field}.values_at_least.targets", f"{key!r} is not one of the keys"
                )
