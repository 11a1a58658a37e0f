"""Request validation, all of it: anything invalid is INVALID_ARGUMENT naming the
offending field (``operations[2].keys[0]``), whatever the load.

The edge's one entry point for checks: the inbound requests (typed protobuf messages)
turned into validated service values (:func:`operation_request(s) <operation_requests>`,
:func:`signals_from_proto`, :func:`filter_from_proto`, :func:`required_id`,
:func:`heartbeat_interval`), so everything past this module can trust its inputs. The
``check_*`` rules on plain values live in :mod:`.field_rules` and are re-exported here,
so a handler imports its checks from one place.

Why the configured size limits (key length, keys per operation, payload bytes, batch
size, timeout range...) are INVALID_ARGUMENT and not RESOURCE_EXHAUSTED: nothing about
such a request changes with load, so a client that backs off and retries (as
RESOURCE_EXHAUSTED tells it to) would retry forever. RESOURCE_EXHAUSTED is left for
capacity that frees up (:class:`~.errors.LimitExceeded`).

Messages quote caller values through :func:`~.quoting.quote` (bounded). Every function
is pure (no I/O, no state), so the same checks apply to the single and the batch forms
of an RPC (and to Session frames).

The hot path: a plain spec (:func:`_plain_request`: a long-poll, or one whose only extra
is a condition) skips the field-by-field checks and the field names they build;
everything it accepts the full path (:func:`_checked_request`) accepts identically, and
whatever it refuses goes to the full path, which names the field
(tests/service/test_fast_paths.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.model.conditions import DEFAULT_CONDITION, EMPTY_SIGNAL, SignalRecord
from purgatory_server._service.model.definitions import OperationDefinition, OperationRequest
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.operation_state import FINAL_STATES, OperationState
from purgatory_server._service.outcomes.subscriptions import EventFilter
from purgatory_server._service.wire.convert import condition_from_proto
from purgatory_server._service.wire.field_prefixes import FieldPrefixes
from purgatory_server._service.wire.field_rules import (
    check_attributes,
    check_batch,
    check_condition,
    check_data,
    check_due_time,
    check_filter,
    check_key,
    check_keys,
    check_operation_id,
    check_payload,
    check_settings,
    check_timeout,
)
from purgatory_server._service.wire.struct_values import attributes_from_struct

__all__ = [
    "MAX_HEARTBEAT_MS",
    "MIN_HEARTBEAT_MS",
    "FieldPrefixes",
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
    "filter_from_proto",
    "heartbeat_interval",
    "operation_request",
    "operation_requests",
    "required_id",
    "signal_from_proto",
    "signals_from_proto",
]

# Bounds of SubscribeRequest.heartbeat_interval_ms (0: no heartbeats).
MIN_HEARTBEAT_MS = 100
MAX_HEARTBEAT_MS = 3_600_000

# The messages an operation spec arrives in (the batch form's and the single RPC's).
SpecMessage = pb.OperationSpec | pb.TryCompleteElseWatchRequest


def required_id(field: str, operation_id: str, limits: Limits) -> str:
    """An operation id that must be given (ForceComplete, GetOperation, Reschedule...)."""
    if not operation_id:
        raise InvalidArgument(field, "must not be empty")
    check_operation_id(field, operation_id, limits)
    return operation_id


def heartbeat_interval(field: str, interval_ms: int) -> float | None:
    """A Subscribe heartbeat interval in seconds (None: no heartbeats)."""
    if not interval_ms:
        return None
    if not MIN_HEARTBEAT_MS <= interval_ms <= MAX_HEARTBEAT_MS:
        raise InvalidArgument(
            field, f"{interval_ms} is outside [{MIN_HEARTBEAT_MS}, {MAX_HEARTBEAT_MS}] ms"
        )
    return interval_ms / 1000


# A NamedTuple built by ``tuple.__new__`` skips its Python-level ``__new__``. Only for the
# plain spec below: ``(keys, timeout_ms, condition, payload)`` followed by the remaining
# fields' defaults, kept in step here (tests/service/test_fast_paths.py checks it).
_new_tuple = tuple.__new__
_PLAIN_FIELDS = ("keys", "timeout_ms", "condition", "payload")
_DEFAULTS = tuple(OperationDefinition._field_defaults[f] for f in OperationDefinition._fields[4:])
if OperationDefinition._fields[:4] != _PLAIN_FIELDS or _DEFAULTS != (0, False, 0):
    raise ImportError("validation's fast path is out of step with OperationDefinition")


def _plain_request(msg: SpecMessage, bounds: _Bounds, limits: Limits) -> OperationRequest | None:
    """The request for a plain spec (keys and sizes within limits, a relative timeout, no
    debounce; a condition, if any, valid), or None when ``msg`` needs the full checks
    (:func:`_checked_request`), which also name the field of any refusal.

    Everything accepted here the full path accepts identically. Each protobuf field read
    builds a Python object, so each is read once; ``bounds`` are the limits, read once
    per batch (:func:`_bounds`).
    """
    max_key, max_keys, low, high, max_id, max_payload = bounds
    wire_keys = msg.keys
    n = len(wire_keys)
    if n == 1:  # the usual long-poll: one read, no generator, no set
        key = wire_keys[0]
        keys: tuple[str, ...] = (key,)
        keys_ok = 0 < len(key) <= max_key and max_keys >= 1
    else:
        keys = tuple(wire_keys)
        # C-level passes (no generator frame per key): many-key specs pay per key here.
        keys_ok = (
            n <= max_keys
            and "" not in keys
            and max(map(len, keys), default=0) <= max_key
            and len(set(keys)) == n
        )
    timeout = msg.timeout_ms
    payload = msg.payload
    op_id = msg.operation_id
    if (
        keys_ok
        and low <= timeout <= high
        and len(op_id) <= max_id
        and len(payload) <= max_payload
        and not msg.due_time_ms
        and not msg.extend_on_resend
        and not msg.max_extend_ms
    ):
        condition = DEFAULT_CONDITION
        if msg.HasField("condition"):
            try:
                condition = condition_from_proto("condition", msg.condition)
                check_condition("condition", condition, keys, limits)
            except InvalidArgument:
                return None  # refused again by the full path, naming the field
        definition = _new_tuple(
            OperationDefinition, (keys, timeout, condition, payload, 0, False, 0)
        )
        return _new_tuple(OperationRequest, (op_id, definition))
    return None


_Bounds = tuple[int, int, int, int, int, int]


def _bounds(limits: Limits) -> _Bounds:
    """What :func:`_plain_request` checks against, read from ``limits`` once."""
    return (
        limits.max_key_length,
        limits.max_keys_per_operation,
        limits.min_timeout_ms,
        limits.max_timeout_ms,
        limits.max_operation_id_length,
        limits.max_payload_bytes,
    )


def _checked_request(prefix: str, msg: SpecMessage, limits: Limits) -> OperationRequest:
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
        definition = OperationDefinition(keys, 0, condition, msg.payload, due)
        return OperationRequest(msg.operation_id, _debounce(prefix, msg, definition, limits))
    check_timeout(f"{prefix}timeout_ms", msg.timeout_ms, limits)
    condition = condition_from_proto(f"{prefix}condition", msg.condition)
    check_condition(f"{prefix}condition", condition, keys, limits)
    check_payload(f"{prefix}payload", msg.payload, limits)
    definition = OperationDefinition(keys, msg.timeout_ms, condition, msg.payload)
    return OperationRequest(msg.operation_id, _debounce(prefix, msg, definition, limits))


def _debounce(
    prefix: str, msg: SpecMessage, definition: OperationDefinition, limits: Limits
) -> OperationDefinition:
    """``definition`` with the debounce policy ``msg`` asks for (:mod:`..core.deadlines`).

    Only relative timeouts debounce (an absolute due time does not move on a re-send), and
    the cap must leave room for the first deadline and stay within ``max_timeout_ms``.
    """
    extend, cap = msg.extend_on_resend, msg.max_extend_ms
    if not extend:
        if cap:
            raise InvalidArgument(f"{prefix}max_extend_ms", "needs extend_on_resend")
        return definition
    if definition.due_time_ms:
        raise InvalidArgument(
            f"{prefix}extend_on_resend",
            "needs timeout_ms: an absolute due_time_ms does not move on a re-send",
        )
    if cap and cap < definition.timeout_ms:
        raise InvalidArgument(
            f"{prefix}max_extend_ms", f"{cap} is below timeout_ms ({definition.timeout_ms})"
        )
    if cap > limits.max_timeout_ms:
        raise InvalidArgument(
            f"{prefix}max_extend_ms", f"{cap} exceeds max_timeout_ms ({limits.max_timeout_ms})"
        )
    return definition._replace(extend_on_resend=True, max_extend_ms=cap)


def operation_request(prefix: str, msg: SpecMessage, limits: Limits) -> OperationRequest:
    """An OperationSpec or TryCompleteElseWatchRequest, validated; ``prefix`` for errors."""
    return _plain_request(msg, _bounds(limits), limits) or _checked_request(prefix, msg, limits)


def operation_requests(
    field: str, msgs: Sequence[pb.OperationSpec], limits: Limits
) -> list[OperationRequest]:
    """Every OperationSpec of a batch, validated (errors name ``field[i].…``); a field
    name is built only for a spec that needs the full checks."""
    bounds = _bounds(limits)
    out: list[OperationRequest] = []
    append = out.append
    for i, msg in enumerate(msgs):
        append(
            _plain_request(msg, bounds, limits) or _checked_request(f"{field}[{i}].", msg, limits)
        )
    return out


def signals_from_proto(
    field: str, msgs: Sequence[pb.KeySignal], limits: Limits
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


def signal_from_proto(field: str, msg: pb.Signal, limits: Limits) -> SignalRecord:
    amount, source, data = msg.amount, msg.source, msg.data
    has_attributes = msg.HasField("attributes")
    if not (amount or source or data or msg.HasField("value") or has_attributes):
        return EMPTY_SIGNAL  # a bare wake-up: equal to what the general path builds
    check_data(f"{field}.data", msg.data, limits)
    if len(msg.source) > limits.max_key_length:
        raise InvalidArgument(
            f"{field}.source",
            f"{len(msg.source)} characters exceed max_key_length ({limits.max_key_length})",
        )
    attributes = None
    if has_attributes:
        attributes = attributes_from_struct(msg.attributes)
        check_attributes(f"{field}.attributes", attributes, limits)
    return SignalRecord(
        amount=msg.amount,
        value=msg.value if msg.HasField("value") else None,
        source=msg.source,
        data=msg.data,
        attributes=attributes,
    )


def filter_from_proto(field: str, msg: pb.SubscribeFilter, limits: Limits) -> EventFilter:
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
