"""Typed, frozen results and inputs of the client API (no gRPC, no I/O).

Times are Unix epoch milliseconds as sent by the server. ``OperationState`` values equal
the wire enum ``purgatory.v1.OperationState``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = [
    "CONFIG_FIELDS",
    "BatchSignalResult",
    "Condition",
    "ConditionKind",
    "Event",
    "ForceCompleteResult",
    "OperationResult",
    "OperationSpec",
    "OperationState",
    "OperationStatus",
    "PurgatoryConfig",
    "PurgatoryInfo",
    "Signal",
]


class OperationState(enum.IntEnum):
    UNSPECIFIED = 0
    WATCHING = 1
    COMPLETED = 2
    EXPIRED = 3
    FORCE_COMPLETED = 4
    CANCELLED = 5

    @property
    def is_final(self) -> bool:
        return self not in (OperationState.UNSPECIFIED, OperationState.WATCHING)


class ConditionKind(enum.Enum):
    ANY_KEY = "any_key"
    ALL_KEYS = "all_keys"
    MIN_SIGNALS = "min_signals"
    SUM_AT_LEAST = "sum_at_least"
    VALUES_AT_LEAST = "values_at_least"


def _no_targets() -> Mapping[str, int]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Condition:
    """When an operation completes; build one with the class methods."""

    kind: ConditionKind = ConditionKind.ANY_KEY
    count: int = 0
    distinct_sources: bool = False
    threshold: int = 0
    targets: Mapping[str, int] = field(default_factory=_no_targets)
    default_target: int = 0
    # Expressions (docs/conditions.md): a CEL filter on the signals that count, a CEL
    # predicate on the result once the kind holds, a ``match`` attribute path, and the
    # operation's own attributes (``op.attributes``).
    filter: str = ""
    predicate: str = ""
    match: str = ""
    attributes: Mapping[str, Any] | None = None

    def where(
        self,
        filter: str = "",
        *,
        predicate: str = "",
        match: str = "",
        attributes: Mapping[str, Any] | None = None,
    ) -> Condition:
        """This condition with expressions: ``Condition.min_signals(2).where(
        "signal.attributes.role == 'finance'")``; arguments left out keep their value."""
        return dataclasses.replace(
            self,
            filter=filter or self.filter,
            predicate=predicate or self.predicate,
            match=match or self.match,
            attributes=self.attributes if attributes is None else dict(attributes),
        )

    @classmethod
    def any_key(cls) -> Condition:
        """The first signal on any key (the default)."""
        return cls()

    @classmethod
    def all_keys(cls) -> Condition:
        """Every key signalled at least once."""
        return cls(ConditionKind.ALL_KEYS)

    @classmethod
    def min_signals(cls, count: int, *, distinct_sources: bool = False) -> Condition:
        """``count`` signals; with ``distinct_sources`` each source counts once."""
        return cls(ConditionKind.MIN_SIGNALS, count=count, distinct_sources=distinct_sources)

    @classmethod
    def sum_at_least(cls, threshold: int) -> Condition:
        """The sum of the signals' ``amount`` reaches ``threshold``."""
        return cls(ConditionKind.SUM_AT_LEAST, threshold=threshold)

    @classmethod
    def values_at_least(
        cls, targets: Mapping[str, int] | None = None, *, default_target: int = 0
    ) -> Condition:
        """Every key's latest ``value`` >= its target (``default_target`` if unlisted)."""
        return cls(
            ConditionKind.VALUES_AT_LEAST,
            targets=MappingProxyType(dict(targets or {})),
            default_target=default_target,
        )


@dataclass(frozen=True)
class Signal:
    """What CheckAndComplete records on a key."""

    amount: int = 0
    value: int | None = None
    source: str = ""
    data: bytes = b""
    # A JSON object that conditions' expressions and ``match`` read (signal.attributes).
    attributes: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class OperationSpec:
    """One operation of a batch registration."""

    keys: tuple[str, ...]
    timeout_ms: int
    condition: Condition = field(default_factory=Condition)
    payload: bytes = b""
    operation_id: str = ""
    # Instead of timeout_ms (then 0): an absolute deadline, Unix epoch ms, judged on the
    # server's wall clock.
    due_time_ms: int = 0
    # Debounce: a re-send of this id while pending pushes the deadline to now + timeout_ms,
    # never past create time + max_extend_ms (0: no cap). See docs/service.md.
    extend_on_resend: bool = False
    max_extend_ms: int = 0


@dataclass(frozen=True)
class OperationResult:
    """What the signals added up to when the operation ended (for a WATCHING operation
    read with ``get_operation``: its progress so far)."""

    signal_count: int = 0
    sources: tuple[str, ...] = ()
    signalled_keys: tuple[str, ...] = ()
    amount_sum: int = 0
    values: Mapping[str, int] = field(default_factory=_no_targets)
    data: bytes = b""
    data_truncated: bool = False
    # Conditions with expressions: the key and attributes of the last signal that counted.
    matched_key: str = ""
    matched_attributes: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class OperationStatus:
    operation_id: str
    state: OperationState
    result: OperationResult
    sequence: int
    created: bool
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    payload: bytes = b""
    # W3C traceparent of the registering request when the server traces (else "").
    traceparent: str = ""

    @property
    def is_final(self) -> bool:
        return self.state.is_final


@dataclass(frozen=True)
class Event:
    """One outcome from a subscription."""

    sequence: int
    purgatory: str
    operation_id: str
    state: OperationState
    keys: tuple[str, ...]
    payload: bytes
    result: OperationResult
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    # A heartbeat (``subscribe(heartbeat_interval_ms=...)``), not an outcome: the stream
    # is alive and has delivered everything matching it up to ``caught_up_sequence``.
    heartbeat: bool = False
    caught_up_sequence: int = 0
    # W3C traceparent of the registering request when the server traces (else "").
    traceparent: str = ""


@dataclass(frozen=True)
class ForceCompleteResult:
    completed: bool
    operation: OperationStatus


@dataclass(frozen=True)
class BatchSignalResult:
    completed: int
    completed_per_signal: tuple[int, ...]


@dataclass(frozen=True)
class PurgatoryConfig:
    """Engine settings; 0 means the server default when creating.

    One field per field of the proto's ``PurgatoryConfig``, same name (the wire mapping
    in ``_requests`` and ``_responses`` follows from the names, :data:`CONFIG_FIELDS`);
    meanings and ranges: docs/configuration.md.
    """

    tick_ms: int = 0
    wheel_size: int = 0
    purge_interval: int = 0
    max_pending: int = 0
    retained_events: int = 0
    # Journal the purgatory under the server's data directory so its pending operations,
    # signals and outcomes survive a restart (the server needs --data-dir).
    durable: bool = False


# PurgatoryConfig's field names, in order: each maps to the proto field of the same name.
CONFIG_FIELDS = tuple(f.name for f in fields(PurgatoryConfig))


@dataclass(frozen=True)
class PurgatoryInfo:
    name: str
    config: PurgatoryConfig
    pending: int
    watched_keys: int
    last_sequence: int
    oldest_sequence: int
    subscribers: int
    # The id of the purgatory's event stream (see StreamResetError); sequences of one
    # incarnation mean nothing in another.
    incarnation: str = ""
