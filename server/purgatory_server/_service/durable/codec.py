"""The service's values <-> journal records (``purgatory.v1.JournalRecord``).

The journal library is ignorant of the service's types, so this is the one place that
knows how they are spelled on disk. The encodings are part of the format docs/journal.md
specifies for outside readers:

- ``OperationRegistered.condition``: a serialized ``purgatory.v1.Condition``;
- ``OperationRegistered.due_wall_ms`` / ``created_wall_ms``: the operation's own
  ``due_time_ms`` / ``create_time_ms`` (wall-clock epoch ms);
- ``Outcome.result``: a serialized ``purgatory.v1.JournaledOutcome`` (the whole event
  as subscribers saw it, plus the condition and timeout so re-sends stay idempotent);
- ``SignalApplied.attributes``: the signal's attributes, a serialized
  ``google.protobuf.Struct`` (deterministic); a condition's expressions and the
  operation's attributes travel inside ``OperationRegistered.condition``;
- ``Outcome.lateness_ms``: for EXPIRED, ``complete_time_ms - due_time_ms`` (>= 0).

All functions are pure; thread-safety is the caller's (the loop thread in the server).
"""

from __future__ import annotations

from typing import Any, cast

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal import PendingOperation
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.model.conditions import (
    ConditionSpec,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import condition_from_proto, event_to_proto
from purgatory_server._service.wire.struct_values import (
    attributes_from_raw,
    attributes_from_struct,
)

__all__ = [
    "PendingDecoder",
    "decode_outcome",
    "decode_pending",
    "outcome_record",
    "registered_record",
    "rescheduled_record",
    "signal_record",
]


def registered_record(purgatory: str, op: RemoteOperation, condition: bytes) -> JournalRecord:
    definition = op.definition
    return JournalRecord(
        registered=JournalRecord.OperationRegistered(
            purgatory=purgatory,
            operation_id=op.operation_id,
            keys=definition.keys,
            timeout_ms=definition.timeout_ms,
            condition=condition,
            payload=definition.payload,
            due_wall_ms=op.due_time_ms,
            created_wall_ms=op.create_time_ms,
            requested_due_wall_ms=definition.due_time_ms,
            extend_on_resend=definition.extend_on_resend,
            max_extend_ms=definition.max_extend_ms,
        )
    )


def rescheduled_record(purgatory: str, operation_id: str, due_time_ms: int) -> JournalRecord:
    return JournalRecord(
        rescheduled=JournalRecord.OperationRescheduled(
            purgatory=purgatory, operation_id=operation_id, due_wall_ms=due_time_ms
        )
    )


def signal_record(purgatory: str, key: str, signal: SignalRecord, now_ms: int) -> JournalRecord:
    return JournalRecord(
        signal=JournalRecord.SignalApplied(
            purgatory=purgatory,
            key=key,
            amount=signal.amount,
            value=signal.value,
            source=signal.source,
            data=signal.data,
            applied_wall_ms=now_ms,
            attributes=b"" if signal.attributes is None else signal.attributes.raw,
        )
    )


def outcome_record(
    outcome: Outcome, condition: Any, timeout_ms: int, requested_due_time_ms: int = 0
) -> JournalRecord:
    """``condition`` is a ``pb.Condition`` (or None if unknown)."""
    lateness = 0
    if outcome.state is OperationState.EXPIRED:
        lateness = max(0, outcome.complete_time_ms - outcome.due_time_ms)
    body = pb.JournaledOutcome(
        event=event_to_proto(outcome),
        condition=condition,
        timeout_ms=timeout_ms,
        requested_due_time_ms=requested_due_time_ms,
    )
    return JournalRecord(
        outcome=JournalRecord.Outcome(
            operation_id=outcome.operation_id,
            state=cast(Any, int(outcome.state)),
            result=body.SerializeToString(),
            sequence=outcome.sequence,
            completed_wall_ms=outcome.complete_time_ms,
            lateness_ms=lateness,
            purgatory=outcome.purgatory,
        )
    )


Registered = JournalRecord.OperationRegistered
Signal = JournalRecord.SignalApplied


def _signal(sig: JournalRecord.SignalApplied) -> tuple[str, SignalRecord]:
    value = sig.value if sig.HasField("value") else None
    attributes = attributes_from_raw(sig.attributes) if sig.attributes else None
    return sig.key, SignalRecord(
        amount=sig.amount, value=value, source=sig.source, data=sig.data, attributes=attributes
    )


def decode_pending(
    pending: PendingOperation,
) -> tuple[OperationDefinition, int, int, list[tuple[str, SignalRecord]]]:
    """(definition, create_time_ms, due_time_ms, signals) of a recovered operation."""
    reg = Registered.FromString(pending.raw)
    condition = pb.Condition.FromString(reg.condition)
    definition = OperationDefinition(
        tuple(reg.keys),
        reg.timeout_ms,
        condition_from_proto("condition", condition),
        reg.payload,
        reg.requested_due_wall_ms,
        reg.extend_on_resend,
        reg.max_extend_ms,
    )
    signals = [_signal(Signal.FromString(sig)) for sig in pending.raw_signals]
    return definition, reg.created_wall_ms, reg.due_wall_ms, signals


class PendingDecoder:
    """:func:`decode_pending` for a whole recovery, sharing what operations have in common.

    Recovered operations mostly share a few conditions and keys: each condition is
    decoded once per distinct encoding and each distinct key kept once. Equal results to
    :func:`decode_pending`. Thread-safety: one recovery (the loop thread) owns an instance.
    """

    __slots__ = ("_conditions", "_ints", "_keys", "_singles", "_times")

    # Keys are shared while there are few of them; past this many distinct keys the
    # table costs more than it saves and new keys are kept as they come.
    MAX_KEYS = 1_000_000

    def __init__(self) -> None:
        self._conditions: dict[bytes, ConditionSpec] = {}
        self._keys: dict[str, str] = {}
        # key -> the one ``(key,)`` every single-key operation on it keeps, and timeouts
        # (most operations share a few).
        self._singles: dict[str, tuple[str]] = {}
        self._ints: dict[int, int] = {}
        # Creation times: operations registered in the same millisecond share one (in
        # journal order, so a small table suffices).
        self._times: dict[int, int] = {}

    def __call__(
        self, pending: PendingOperation
    ) -> tuple[OperationDefinition, int, int, list[tuple[str, SignalRecord]]]:
        reg = Registered.FromString(pending.raw)  # the journal keeps it serialized
        raw = reg.condition
        spec = self._conditions.get(raw)
        if spec is None:
            spec = condition_from_proto("condition", pb.Condition.FromString(raw))
            if len(self._conditions) < 1000:
                self._conditions[raw] = spec
        reg_keys = reg.keys
        keys: tuple[str, ...]
        if len(reg_keys) == 1:
            key = reg_keys[0]
            single = self._singles.get(key)
            if single is None:
                single = (self._keys.setdefault(key, key),)
                if len(self._singles) < self.MAX_KEYS:
                    self._singles[key] = single
            keys = single
        elif len(pending.keys) == len(reg_keys):
            # No key listed twice: the journal's distinct keys are these, in this order.
            keys = pending.keys
        else:
            shared = self._keys
            keys = tuple([shared.setdefault(k, k) for k in reg_keys])
            if len(shared) > self.MAX_KEYS:
                shared.clear()
        timeout = reg.timeout_ms
        ints = self._ints
        timeout = ints.setdefault(timeout, timeout)
        if len(ints) > 1000:
            ints.clear()
        definition = OperationDefinition(
            keys,
            timeout,
            spec,
            reg.payload,
            reg.requested_due_wall_ms,
            reg.extend_on_resend,
            reg.max_extend_ms,
        )
        raw_signals = pending.raw_signals
        signals = [_signal(Signal.FromString(s)) for s in raw_signals] if raw_signals else []
        created = reg.created_wall_ms
        times = self._times
        created = times.setdefault(created, created)
        if len(times) > 4096:
            times.clear()
        return definition, created, reg.due_wall_ms, signals


def _result(msg: Any) -> ResultSnapshot:
    if not msg.signal_count and not msg.values:
        return ResultSnapshot()
    return ResultSnapshot(
        signal_count=msg.signal_count,
        sources=tuple(msg.sources),
        signalled_keys=tuple(msg.signalled_keys),
        amount_sum=msg.amount_sum,
        values=tuple(sorted(msg.values.items())),
        data=msg.data,
        data_truncated=msg.data_truncated,
        matched_key=msg.matched_key,
        matched=attributes_from_struct(msg.matched_attributes)
        if msg.HasField("matched_attributes")
        else None,
    )


def decode_outcome(record: JournalRecord.Outcome) -> tuple[OperationDefinition, Outcome]:
    """The definition and event an outcome record describes."""
    body = pb.JournaledOutcome.FromString(record.result)
    event = body.event
    keys = tuple(event.keys)
    definition = OperationDefinition(
        keys,
        body.timeout_ms,
        condition_from_proto("condition", body.condition),
        event.payload,
        body.requested_due_time_ms,
    )
    outcome = Outcome(
        sequence=event.sequence,
        purgatory=event.purgatory,
        operation_id=event.operation_id,
        state=OperationState(event.state),
        keys=keys,
        payload=event.payload,
        result=_result(event.result),
        create_time_ms=event.create_time_ms,
        due_time_ms=event.due_time_ms,
        complete_time_ms=event.complete_time_ms,
    )
    return definition, outcome
