"""Operations that fell due while a durable server was down (issue 16, downtime).

On restart every recovered operation is re-armed at its journaled due time; one whose
due time has passed (or falls within the first tick, which the timer also runs at once)
expires at once. The timer hands such already-due operations to its one executor thread
in the order they are re-armed, and the executor runs them in that order, so re-arming
the late ones first and sorted by due time makes them expire, and be published, in
due-time order, before anything else fires. Each is re-armed once, so each expires
exactly once (its outcome record then ends it in the journal for good).

Cost: two passes over the recovered operations plus a sort of the late ones only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["rearm_order"]


def rearm_order(pending: Mapping[str, Any], now_ms: int, tick_ms: int) -> Iterator[tuple[str, Any]]:
    """``pending`` (id -> journal PendingOperation) in re-arming order: those due by
    ``now_ms + tick_ms`` first, by due time (ties: journal order), then the rest in
    journal order."""
    horizon = now_ms + tick_ms
    # Two passes instead of one that lists every operation: only the late ones (usually
    # few) are held, and the rest stream out in journal order.
    late: list[tuple[int, int, str, Any]] = []
    for n, (op_id, op) in enumerate(pending.items()):
        due = op.due_wall_ms
        if due <= horizon:
            late.append((due, n, op_id, op))
    late.sort(key=lambda item: (item[0], item[1]))
    for _, _, op_id, op in late:
        yield op_id, op
    if len(late) == len(pending):
        return
    for op_id, op in pending.items():
        if op.due_wall_ms > horizon:
            yield op_id, op
