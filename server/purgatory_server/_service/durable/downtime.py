"""Operations that fell due while a durable server was down (downtime releases).

An operation whose journaled due time has passed (or falls within the first tick)
expires as soon as it is re-armed, and the timer's one executor runs such operations in
re-arming order. Re-arming the late ones first, by due time, makes them expire and be
published in due-time order before anything else fires. Each is re-armed once, so each
expires exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from purgatory_server._journal import PendingView

__all__ = ["rearm_order"]


def rearm_order(pending: Mapping[str, Any], now_ms: int, tick_ms: int) -> Iterator[tuple[str, Any]]:
    """``pending`` (id -> journal PendingOperation) in re-arming order: those due by
    ``now_ms + tick_ms`` first, by due time (ties: journal order), then the rest in
    journal order."""
    horizon = now_ms + tick_ms
    # The journal's opening snapshot has the due times at hand; reading them from each
    # PendingOperation would build every one of them once more.
    dues: Mapping[str, int]
    if isinstance(pending, PendingView):
        dues = pending.due_times
    else:
        dues = {op_id: op.due_wall_ms for op_id, op in pending.items()}
    # Only the late ones (usually few) are listed; the rest stream out in journal order.
    late = [(due, n, op_id) for n, (op_id, due) in enumerate(dues.items()) if due <= horizon]
    late.sort()  # by due time, then journal order (n is unique)
    for _, _, op_id in late:
        yield op_id, pending[op_id]
    if not late:
        yield from pending.items()
    elif len(late) < len(dues):
        for op_id, op in pending.items():
            if op.due_wall_ms > horizon:
                yield op_id, op
