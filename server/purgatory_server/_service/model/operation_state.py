"""Operation states, numbered as the wire enum ``purgatory.v1.OperationState``.

Kept free of protobuf so the engine-side modules can be used and tested without it;
``convert`` relies on the values being equal to the proto enum's.
"""

from __future__ import annotations

import enum

__all__ = ["FINAL_STATES", "OperationState"]


class OperationState(enum.IntEnum):
    UNSPECIFIED = 0
    WATCHING = 1
    COMPLETED = 2
    EXPIRED = 3
    FORCE_COMPLETED = 4
    CANCELLED = 5


FINAL_STATES = frozenset(
    {
        OperationState.COMPLETED,
        OperationState.EXPIRED,
        OperationState.FORCE_COMPLETED,
        OperationState.CANCELLED,
    }
)
