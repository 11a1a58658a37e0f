"""The journal's dedup window: recent outcome records kept for the server's finished ids.

Why: after a restart a re-sent id must get its recorded outcome for as long as the
server's dedup window promises (``dedup_window_ms``), whatever the event window holds. Kept
here: outcomes that ended within ``window_ms`` of the newest one (``completed_wall_ms``),
oldest dropped first past ``max_bytes``; they pin their segments like the event window
(:mod:`.compaction`).

Thread-safety: none; owned by a :class:`~.state.JournalState`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterable, Sequence

from purgatory_proto.v1.journal_pb2 import JournalRecord

__all__ = ["Dedup", "DedupWindow"]

# (window_ms, max_bytes) as a journal is configured with them.
Dedup = tuple[int, int]

Outcome = JournalRecord.Outcome
# Per record, besides its serialized bytes: the parsed message's own overhead, roughly.
RECORD_OVERHEAD = 32


class DedupWindow:
    """Outcome records by journal index, oldest first, bounded in time and bytes."""

    __slots__ = ("_bytes", "_records", "max_bytes", "window_ms")

    def __init__(self, window_ms: int, max_bytes: int) -> None:
        self.window_ms = window_ms
        self.max_bytes = max_bytes
        self._records: deque[tuple[int, Outcome, int]] = deque()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._records)

    def add(self, index: int, outcome: Outcome) -> None:
        """Keep ``outcome`` (journal ``index``); drop what falls out of the window."""
        if not (self.window_ms and self.max_bytes):
            return
        records = self._records
        size = outcome.ByteSize() + RECORD_OVERHEAD
        records.append((index, outcome, size))
        self._bytes += size
        horizon = outcome.completed_wall_ms - self.window_ms
        while records and (
            self._bytes > self.max_bytes or records[0][1].completed_wall_ms < horizon
        ):
            self._bytes -= records.popleft()[2]

    def pin(self, first: int | None) -> int | None:
        """The lower of ``first`` (the event window's oldest index) and this window's
        oldest: compaction deletes no segment from there on."""
        if not self._records:
            return first
        own = self._records[0][0]
        return own if first is None else min(first, own)

    def carry(
        self, events: Sequence[tuple[int, Outcome]], pending: Container[str]
    ) -> list[Outcome]:
        """What a snapshot carries, in journal order: the event window (``events``) whole,
        and of this window each id's latest outcome that the event window does not hold
        and whose id is not ``pending`` again. A reader replays no registrations from
        before the snapshot, so an id's later outcome would be ignored as a second one;
        and the finished-id memory keeps an id's latest outcome only."""
        held = {outcome.operation_id for _, outcome in events}
        older: dict[str, tuple[int, Outcome]] = {}
        for index, outcome, _ in self._records:
            if outcome.operation_id not in held and outcome.operation_id not in pending:
                older[outcome.operation_id] = (index, outcome)  # a later one replaces it
        return [outcome for _, outcome in sorted([*older.values(), *events], key=_index)]

    def merge(self, events: Iterable[tuple[int, Outcome]]) -> tuple[Outcome, ...]:
        """The records of ``events`` (the event window) and of this window, in journal
        order, each once: what the server's finished-id memory is rebuilt from."""
        merged = dict(events)
        merged.update((index, outcome) for index, outcome, _ in self._records)
        return tuple(merged[index] for index in sorted(merged))


def _index(item: tuple[int, Outcome]) -> int:
    return item[0]
