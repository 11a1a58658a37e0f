"""What the sync and async clients share, with no I/O: request building, response
parsing, and the resume logic of ``subscribe``.

Keeping this free of calls means the two clients differ only in how they *perform* a call
(blocking vs ``await``), so their behaviour cannot drift apart.

Resume without loss or duplication (:class:`ResumeCursor`): the server sends, as response
header metadata, the sequence a stream starts after; every received event moves the
cursor to its sequence. After a dropped stream (UNAVAILABLE, or a slow-subscriber
RESOURCE_EXHAUSTED) the client re-subscribes with ``after_sequence=cursor``, and the
server replays exactly the retained events after it (filtered as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from purgatory_proto.v1 import purgatory_pb2 as pb

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
from purgatory_client.errors import PurgatoryError, SlowSubscriberError, UnavailableError

__all__ = ["DEFAULT_PURGATORY", "ResumeCursor", "ResumePolicy"]

DEFAULT_PURGATORY = "default"
START_AFTER = "purgatory-start-after"


# ---------------------------------------------------------------- requests
def condition_to_proto(condition: Condition | None) -> Any:
    if condition is None or condition.kind is ConditionKind.ANY_KEY:
        return pb.Condition(any_key=pb.AnyKeyCondition())
    kind = condition.kind
    if kind is ConditionKind.ALL_KEYS:
        return pb.Condition(all_keys=pb.AllKeysCondition())
    if kind is ConditionKind.MIN_SIGNALS:
        return pb.Condition(
            min_signals=pb.MinSignalsCondition(
                count=condition.count, distinct_sources=condition.distinct_sources
            )
        )
    if kind is ConditionKind.SUM_AT_LEAST:
        return pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=condition.threshold))
    return pb.Condition(
        values_at_least=pb.ValuesAtLeastCondition(
            targets=dict(condition.targets), default_target=condition.default_target
        )
    )


def signal_to_proto(signal: Signal | None) -> Any:
    if signal is None:
        return pb.Signal()
    msg = pb.Signal(amount=signal.amount, source=signal.source, data=signal.data)
    if signal.value is not None:
        msg.value = signal.value
    return msg


def watch_request(
    purgatory: str,
    *,
    keys: Sequence[str],
    timeout_ms: int,
    condition: Condition | None,
    payload: bytes,
    operation_id: str,
    wait: bool,
) -> Any:
    return pb.TryCompleteElseWatchRequest(
        purgatory=purgatory,
        operation_id=operation_id,
        keys=list(keys),
        timeout_ms=timeout_ms,
        condition=condition_to_proto(condition),
        payload=payload,
        wait=wait,
    )


def batch_watch_request(purgatory: str, specs: Iterable[OperationSpec], wait: bool) -> Any:
    return pb.BatchTryCompleteElseWatchRequest(
        purgatory=purgatory,
        wait=wait,
        operations=[
            pb.OperationSpec(
                operation_id=s.operation_id,
                keys=list(s.keys),
                timeout_ms=s.timeout_ms,
                condition=condition_to_proto(s.condition),
                payload=s.payload,
            )
            for s in specs
        ],
    )


def signal_request(purgatory: str, key: str, signal: Signal | None) -> Any:
    return pb.CheckAndCompleteRequest(purgatory=purgatory, key=key, signal=signal_to_proto(signal))


def batch_signal_request(purgatory: str, signals: Iterable[tuple[str, Signal | None] | str]) -> Any:
    items = []
    for entry in signals:
        key, signal = (entry, None) if isinstance(entry, str) else entry
        items.append(pb.KeySignal(key=key, signal=signal_to_proto(signal)))
    return pb.BatchCheckAndCompleteRequest(purgatory=purgatory, signals=items)


def config_to_proto(config: PurgatoryConfig | None) -> Any:
    c = config or PurgatoryConfig()
    return pb.PurgatoryConfig(
        tick_ms=c.tick_ms,
        wheel_size=c.wheel_size,
        purge_interval=c.purge_interval,
        max_pending=c.max_pending,
        retained_events=c.retained_events,
    )


def subscribe_request(
    purgatory: str,
    after_sequence: int | None,
    states: Iterable[OperationState],
    keys: Iterable[str],
    operation_id_prefix: str,
) -> Any:
    request = pb.SubscribeRequest(
        purgatory=purgatory,
        filter=pb.SubscribeFilter(
            states=cast(Any, [int(s) for s in states]),
            keys=list(keys),
            operation_id_prefix=operation_id_prefix,
        ),
    )
    if after_sequence is not None:
        request.after_sequence = after_sequence
    return request


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
        traceparent=msg.traceparent,
    )


def info_from_proto(msg: Any) -> PurgatoryInfo:
    c = msg.config
    return PurgatoryInfo(
        name=msg.name,
        config=PurgatoryConfig(
            c.tick_ms, c.wheel_size, c.purge_interval, c.max_pending, c.retained_events
        ),
        pending=msg.pending,
        watched_keys=msg.watched_keys,
        last_sequence=msg.last_sequence,
        oldest_sequence=msg.oldest_sequence,
        subscribers=msg.subscribers,
    )


# ---------------------------------------------------------------- subscribe resume
@dataclass(frozen=True)
class ResumePolicy:
    """How ``subscribe`` retries a dropped stream: up to ``attempts`` times in a row
    without receiving an event, sleeping ``initial_delay_s`` doubled each time (capped)."""

    attempts: int = 8
    initial_delay_s: float = 0.05
    max_delay_s: float = 2.0


class ResumeCursor:
    """Where a subscription is, and whether (and when) to resume it after an error.

    Not thread-safe: one cursor belongs to one ``subscribe`` generator.
    """

    __slots__ = ("_failures", "_policy", "position")

    def __init__(self, after_sequence: int | None, policy: ResumePolicy) -> None:
        self.position = after_sequence
        self._policy = policy
        self._failures = 0

    def started(self, initial_metadata: Mapping[str, str] | Iterable[tuple[str, Any]]) -> None:
        """Take the stream's start point from the header if we had none."""
        if self.position is not None:
            return
        pairs = (
            initial_metadata.items() if isinstance(initial_metadata, Mapping) else initial_metadata
        )
        for key, value in pairs:
            if key == START_AFTER:
                self.position = int(value)

    def advance(self, sequence: int) -> None:
        self.position = sequence
        self._failures = 0

    def retry_delay(self, error: PurgatoryError) -> float:
        """Seconds to wait before resuming; re-raises ``error`` if it is not resumable."""
        resumable = isinstance(error, SlowSubscriberError | UnavailableError)
        if not resumable or self.position is None or self._failures >= self._policy.attempts:
            raise error
        delay = min(self._policy.initial_delay_s * (2**self._failures), self._policy.max_delay_s)
        self._failures += 1
        return 0.0 if isinstance(error, SlowSubscriberError) else delay
