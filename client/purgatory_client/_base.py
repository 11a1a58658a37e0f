"""What the sync and async clients share, with no I/O: request building, response
parsing, and the resume logic of ``subscribe``.

Keeping this free of calls means the two clients differ only in how they *perform* a call
(blocking vs ``await``), so their behaviour cannot drift apart.

Resume without loss or duplication (:class:`ResumeCursor`): the server sends, as response
header metadata, the sequence a stream starts after; every received event moves the
cursor to its sequence. After a dropped stream (UNAVAILABLE, or a slow-subscriber
RESOURCE_EXHAUSTED) the client re-subscribes with ``after_sequence=cursor``, and the
server replays exactly the retained events after it (filtered as before).

Never across a reset: the header also carries the stream's incarnation, which the cursor
keeps and sends with every resume. If the purgatory's stream was reset meanwhile (an
in-memory purgatory whose server restarted), the server refuses with
FAILED_PRECONDITION and the client raises :class:`~purgatory_client.StreamResetError`
instead of resuming into a different stream's sequences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, cast

import grpc
from google.protobuf.descriptor import FieldDescriptor
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._checks import converting, int64, key_list, text, uint
from purgatory_client._long_poll import new_operation_id
from purgatory_client._models import (
    BatchSignalResult,
    Condition,
    ConditionKind,
    Event,
    ForceCompleteResult,
    OperationResult,
    OperationSpec,
    OperationState,
    OperationStatus,
    PurgatoryConfig,
    PurgatoryInfo,
    Signal,
)
from purgatory_client.errors import (
    InvalidArgumentError,
    PurgatoryError,
    SlowSubscriberError,
    UnavailableError,
    invalid_argument,
)

__all__ = ["DEFAULT_PURGATORY", "ResumeCursor", "ResumePolicy"]

DEFAULT_PURGATORY = "default"
START_AFTER = "purgatory-start-after"
INCARNATION = "purgatory-incarnation"


# ---------------------------------------------------------------- requests
def condition_to_proto(condition: Condition | None, field: str = "condition") -> Any:
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


def batch_watch_request(purgatory: str, specs: Iterable[OperationSpec], wait: bool) -> Any:
    if isinstance(specs, OperationSpec):
        raise invalid_argument("operations", "expected a list of OperationSpec, got one")
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
_CONFIG_FIELDS = tuple(f.name for f in fields(PurgatoryConfig))
_UINT_BITS = {
    FieldDescriptor.TYPE_UINT32: 32,
    FieldDescriptor.TYPE_UINT64: 64,
}


def config_to_proto(config: PurgatoryConfig | None) -> Any:
    c = config or PurgatoryConfig()
    msg = pb.PurgatoryConfig()
    for name in _CONFIG_FIELDS:
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


def heartbeat_deadline(heartbeat_interval_ms: int, dead_after_s: float | None) -> float | None:
    """Seconds of silence after which ``subscribe`` treats its stream as dead."""
    if dead_after_s is not None:
        if dead_after_s <= 0:
            raise invalid_argument("dead_after_s", f"{dead_after_s} is not positive")
        if not heartbeat_interval_ms:
            raise invalid_argument("dead_after_s", "needs heartbeat_interval_ms")
        return dead_after_s
    return None


def dead_stream(dead_after_s: float) -> UnavailableError:
    """The error a silent stream counts as (resumed like a dropped connection)."""
    return UnavailableError(
        grpc.StatusCode.UNAVAILABLE,
        f"no event or heartbeat for {dead_after_s:g} s: the stream is treated as dead",
    )


# ---------------------------------------------------------------- responses
def result_from_proto(msg: Any) -> OperationResult:
    return OperationResult(
        signal_count=msg.signal_count,
        sources=tuple(msg.sources),
        signalled_keys=tuple(msg.signalled_keys),
        amount_sum=msg.amount_sum,
        values=MappingProxyType(dict(msg.values)),
        data=msg.data,
        data_truncated=msg.data_truncated,
    )


def status_from_proto(msg: Any, payload: bytes | None = None) -> OperationStatus:
    """From an OperationStatus or a TryCompleteElseWatchResponse (same field names)."""
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


def statuses_from_proto(msg: Any) -> list[OperationStatus]:
    return [status_from_proto(s) for s in msg.operations]


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
        config=PurgatoryConfig(**{name: getattr(c, name) for name in _CONFIG_FIELDS}),
        pending=msg.pending,
        watched_keys=msg.watched_keys,
        last_sequence=msg.last_sequence,
        oldest_sequence=msg.oldest_sequence,
        subscribers=msg.subscribers,
        incarnation=msg.incarnation,
    )


# ---------------------------------------------------------------- subscribe resume
@dataclass(frozen=True)
class ResumePolicy:
    """How ``subscribe`` retries a dropped stream (and ``watch_many`` and the long-polls
    re-send after UNAVAILABLE): up to ``attempts`` times in a row without progress,
    sleeping ``initial_delay_s`` doubled each time (capped at ``max_delay_s``). The
    default gives up after about 8 s of outage; ``attempts=None`` (or :meth:`forever`)
    never gives up on an UNAVAILABLE server."""

    attempts: int | None = 8
    initial_delay_s: float = 0.05
    max_delay_s: float = 2.0

    @classmethod
    def forever(cls, max_delay_s: float = 2.0) -> ResumePolicy:
        """Resume however long the outage lasts, at most ``max_delay_s`` apart."""
        return cls(attempts=None, max_delay_s=max_delay_s)

    def exhausted(self, failures: int) -> bool:
        """True once ``failures`` resumes in a row have failed and no more are allowed."""
        return self.attempts is not None and failures >= self.attempts

    def delay_s(self, failures: int) -> float:
        """The sleep before resume number ``failures + 1`` (the exponent is bounded, so
        a policy that resumes forever never overflows)."""
        return min(self.initial_delay_s * 2.0 ** min(failures, 32), self.max_delay_s)


class ResumeCursor:
    """Where a subscription is, and whether (and when) to resume it after an error.

    Not thread-safe: one cursor belongs to one ``subscribe`` generator.
    """

    __slots__ = ("_failures", "_policy", "incarnation", "position")

    def __init__(
        self, after_sequence: int | None, policy: ResumePolicy, incarnation: str | None = None
    ) -> None:
        self.position = after_sequence
        # The stream ``position`` belongs to; sent with every (re)subscribe once known.
        self.incarnation = incarnation or None
        self._policy = policy
        self._failures = 0

    def started(self, initial_metadata: Mapping[str, str] | Iterable[tuple[str, Any]]) -> None:
        """Take the stream's start point and incarnation from the header if we had none.

        The server checked a known incarnation before answering, so the header's can only
        differ from ours when we had none yet.
        """
        pairs = (
            initial_metadata.items() if isinstance(initial_metadata, Mapping) else initial_metadata
        )
        for key, value in pairs:
            text = value if isinstance(value, str) else bytes(value).decode()
            if key == START_AFTER and self.position is None:
                self.position = int(text)
            elif key == INCARNATION and self.incarnation is None:
                self.incarnation = text

    def advance(self, sequence: int) -> None:
        self.position = sequence
        self._failures = 0

    def retry_delay(self, error: PurgatoryError) -> float:
        """Seconds to wait before resuming; re-raises ``error`` if it is not resumable."""
        resumable = isinstance(error, SlowSubscriberError | UnavailableError)
        if not resumable or self.position is None or self._policy.exhausted(self._failures):
            raise error
        delay = self._policy.delay_s(self._failures)
        self._failures += 1
        return 0.0 if isinstance(error, SlowSubscriberError) else delay
