"""What a caller asks for: an operation's definition, a registration request, and what
the journal adds to a recovered one. Immutable tuples, safe to share between threads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from purgatory_server._service.model.conditions import ConditionSpec, SignalRecord

__all__ = ["OperationDefinition", "OperationRequest", "Recovered", "RestoredOperation"]


class OperationDefinition(NamedTuple):
    """What a caller asked for; equal definitions make a re-send idempotent.

    Why a NamedTuple rather than a frozen dataclass (here and for the model's other
    per-operation records): a tuple is built in one step, where a frozen dataclass sets
    each field through ``object.__setattr__``.
    """

    keys: tuple[str, ...]
    timeout_ms: int
    condition: ConditionSpec
    payload: bytes
    # Non-zero: the caller gave this absolute due time (epoch ms, server wall clock)
    # instead of a timeout, and timeout_ms is 0.
    due_time_ms: int = 0
    # Debounce (``core.deadlines``): the operation's policy, fixed when it is created. Not
    # compared: a re-send is the same operation whatever options it carries.
    extend_on_resend: bool = False
    max_extend_ms: int = 0

    # Equality (and so idempotence) covers the first five fields only: see above.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OperationDefinition):
            return NotImplemented
        return self[:5] == other[:5]

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, OperationDefinition):
            return NotImplemented
        return self[:5] != other[:5]

    def __hash__(self) -> int:
        return hash(self[:5])


class OperationRequest(NamedTuple):
    """A validated request to register one operation ("" id: the server assigns one)."""

    operation_id: str
    definition: OperationDefinition


class Recovered(NamedTuple):
    """What the journal knows of a pending operation beyond its definition (restore),
    and the wall clock read once for its recovery batch (``now_ms``)."""

    create_time_ms: int
    due_time_ms: int
    signals: Sequence[tuple[str, SignalRecord]]
    now_ms: int


# A recovered operation: (id, definition, create_time_ms, due_time_ms, signals so far).
RestoredOperation = tuple[str, OperationDefinition, int, int, Sequence[tuple[str, SignalRecord]]]
