"""An operation's end: the value published to waiters, subscribers and the journal."""

from __future__ import annotations

from typing import NamedTuple

from purgatory_server._service.model.conditions import ResultSnapshot
from purgatory_server._service.model.operation_state import OperationState

__all__ = ["Outcome"]


class Outcome(NamedTuple):
    """An operation's end, as published to waiters, subscribers and the journal."""

    sequence: int
    purgatory: str
    operation_id: str
    state: OperationState
    keys: tuple[str, ...]
    payload: bytes
    result: ResultSnapshot
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    # W3C traceparent of the request that registered the operation ("" untraced); it
    # is not journaled, so outcomes recovered after a restart carry none.
    traceparent: str = ""
    # What it holds in memory (model.sizes), computed once by the feed so that every
    # memory that keeps or drops it charges the same figure; 0: computed on use.
    # Not compared: an outcome is the same whatever figure it carries.
    nbytes: int = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self[:11] == other[:11]

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self[:11] != other[:11]

    def __hash__(self) -> int:
        return hash(self[:11])
