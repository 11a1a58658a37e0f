"""Responses with no I/O: the client's frozen results from the server's messages."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from google.protobuf import json_format

from purgatory_client._models import (
    CONFIG_FIELDS,
    BatchSignalResult,
    Event,
    ForceCompleteResult,
    OperationResult,
    OperationState,
    OperationStatus,
    PurgatoryConfig,
    PurgatoryInfo,
)

__all__ = [
    "batch_signal_from_proto",
    "event_from_proto",
    "force_from_proto",
    "info_from_proto",
    "result_from_proto",
    "status_from_proto",
    "statuses_from_proto",
]


def result_from_proto(msg: Any) -> OperationResult:
    return OperationResult(
        signal_count=msg.signal_count,
        sources=tuple(msg.sources),
        signalled_keys=tuple(msg.signalled_keys),
        amount_sum=msg.amount_sum,
        values=MappingProxyType(dict(msg.values)),
        data=msg.data,
        data_truncated=msg.data_truncated,
        matched_key=msg.matched_key,
        matched_attributes=_struct_value(msg.matched_attributes)
        if msg.HasField("matched_attributes")
        else None,
    )


def _struct_value(msg: Any) -> dict[str, Any]:
    """A google.protobuf.Struct as a plain dict (integral numbers as ints)."""
    return {key: _plain(value) for key, value in json_format.MessageToDict(msg).items()}


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def status_from_proto(msg: Any, payload: bytes | None = None) -> OperationStatus:
    """From an OperationStatus or a TryCompleteElseWatchResponse (same field names).

    ``payload``: the one the caller sent, for a registration's answer, which carries none.
    """
    return OperationStatus(
        operation_id=msg.operation_id,
        state=OperationState(msg.state),
        result=result_from_proto(msg.result),
        sequence=msg.sequence,
        created=msg.created,
        create_time_ms=msg.create_time_ms,
        due_time_ms=msg.due_time_ms,
        complete_time_ms=msg.complete_time_ms,
        payload=msg.payload if payload is None else payload,
        traceparent=msg.traceparent,
    )


def statuses_from_proto(msg: Any, payloads: Sequence[bytes]) -> list[OperationStatus]:
    """A batch registration's answer, with the payloads sent, in request order."""
    return [status_from_proto(s, p) for s, p in zip(msg.operations, payloads, strict=True)]


def force_from_proto(msg: Any) -> ForceCompleteResult:
    return ForceCompleteResult(msg.completed, status_from_proto(msg.operation))


def batch_signal_from_proto(msg: Any) -> BatchSignalResult:
    return BatchSignalResult(msg.completed, tuple(msg.completed_per_signal))


def event_from_proto(msg: Any) -> Event:
    return Event(
        sequence=msg.sequence,
        purgatory=msg.purgatory,
        operation_id=msg.operation_id,
        state=OperationState(msg.state),
        keys=tuple(msg.keys),
        payload=msg.payload,
        result=result_from_proto(msg.result),
        create_time_ms=msg.create_time_ms,
        due_time_ms=msg.due_time_ms,
        complete_time_ms=msg.complete_time_ms,
        heartbeat=msg.heartbeat,
        caught_up_sequence=msg.caught_up_sequence,
        traceparent=msg.traceparent,
    )


def info_from_proto(msg: Any) -> PurgatoryInfo:
    c = msg.config
    return PurgatoryInfo(
        name=msg.name,
        config=PurgatoryConfig(**{name: getattr(c, name) for name in CONFIG_FIELDS}),
        pending=msg.pending,
        watched_keys=msg.watched_keys,
        last_sequence=msg.last_sequence,
        oldest_sequence=msg.oldest_sequence,
        subscribers=msg.subscribers,
        incarnation=msg.incarnation,
    )
