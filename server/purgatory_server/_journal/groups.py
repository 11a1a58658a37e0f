"""Worker groups as the journal sees them: which outcomes each group still holds.

Replay rules (docs/journal.md "Worker groups"), applied in journal order:

- ``group_state``: *replaces* the group (creation, or compaction's carry with its
  entries); with ``deleted`` it removes it.
- ``outcome``: joins every group whose ``last_sequence`` is below its sequence (a group
  takes every outcome after its creation) as an entry with 0 attempts.
- ``group_delivered`` (a lease, or its extension): the entry's attempts become
  ``attempt`` and its lease deadline ``lease_deadline_wall_ms``.
- ``group_settled``: ACKED removes the entries (acked, or discarded dead letters),
  DEAD_LETTERED marks them dead,
  REDRIVEN makes them live again with a fresh budget: ``redriven_at`` becomes
  ``attempts``, which stays (attempt numbers never repeat: they fence stale acks). Dead
  letters and redriven entries hold no lease (deadline 0).
- ``group_retry`` (a nack, or a lapsed lease of a group with backoff): the entry's
  attempts become at least ``attempt``, its lease ends, and it waits until
  ``retry_at_wall_ms``. A later lease (``group_delivered``) or settlement clears the wait.
  Unknown groups or sequences are ignored.
- a rate-limited group (``rate_window_ms`` set): each ``group_delivered`` with a
  ``delivered_wall_ms`` adds that time to its ``rate_key``'s window, and a key keeps
  only the times within ``rate_window_ms`` of the group's latest one (the service
  drops, at start-up, those already out of the window by its clock).

Compaction carries every group whose ``group_state`` lies below the cutoff as a new
``group_state`` holding its whole state, entries (with their outcome records) included.
A group's entries are all outcomes recorded after its latest ``group_state``, so nothing
it needs is below that record: the carry is the only thing that must move (its rate
windows included).

Thread-safety: none; owned by the :class:`~.state.JournalState` that owns it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from purgatory_proto.v1.journal_pb2 import JournalRecord

__all__ = ["GroupTracker", "RecoveredGroup"]

GroupState = JournalRecord.GroupState
RateWindow = JournalRecord.RateWindow
_FIRST_SWEEP = 64
Entry = JournalRecord.GroupState.Entry
Settled = JournalRecord.GroupSettled


@dataclass(slots=True)
class _Item:
    outcome: JournalRecord.Outcome
    attempts: int
    dead: bool
    redriven_at: int = 0
    lease_deadline: int = 0
    retry_at: int = 0


@dataclass(slots=True)
class _LiveGroup:
    state: GroupState  # the settings (entries cleared)
    last_sequence: int
    entries: dict[int, _Item]
    anchor: int
    # A rate-limited group's delivery times per rate key, oldest first.
    windows: dict[str, deque[int]] = field(default_factory=dict)
    latest_delivery: int = 0
    sweep_at: int = _FIRST_SWEEP

    def add_delivery(self, key: str, at: int) -> None:
        window_ms = self.state.rate_window_ms
        self.latest_delivery = max(self.latest_delivery, at)
        times = self.windows.get(key)
        if times is None:
            times = self.windows[key] = deque()
        times.append(at)
        cutoff = self.latest_delivery - window_ms
        while times and times[0] <= cutoff:  # O(1) amortized
            times.popleft()
        if not times:  # a time recorded out of order, already out of the window
            del self.windows[key]
        if len(self.windows) > self.sweep_at:
            self.rate_windows()
            self.sweep_at = max(_FIRST_SWEEP, 2 * len(self.windows))

    def rate_windows(self) -> list[RateWindow]:
        """The windows, each pruned to the group's latest delivery (carry, snapshot)."""
        cutoff = self.latest_delivery - self.state.rate_window_ms
        out = []
        for key in list(self.windows):
            kept = [t for t in self.windows[key] if t > cutoff]
            if kept:
                self.windows[key] = deque(kept)
                out.append(RateWindow(key=key, delivered_wall_ms=kept))
            else:
                del self.windows[key]
        return out


@dataclass(frozen=True, slots=True)
class RecoveredGroup:
    """A group handed to the server at start-up: settings, cursor, entries by sequence."""

    state: GroupState
    last_sequence: int
    entries: tuple[Entry, ...]
    rate_windows: tuple[RateWindow, ...] = ()


class GroupTracker:
    """Applies the group records (see module docstring)."""

    def __init__(self) -> None:
        self.groups: dict[str, _LiveGroup] = {}

    def apply_state(self, index: int, record: GroupState) -> None:
        if record.deleted:
            self.groups.pop(record.group, None)
            return
        settings = GroupState()
        settings.CopyFrom(record)
        del settings.entries[:]
        del settings.rate_windows[:]
        entries = {
            e.outcome.sequence: _Item(
                e.outcome,
                e.attempts,
                e.dead,
                e.redriven_at,
                e.lease_deadline_wall_ms,
                e.retry_at_wall_ms,
            )
            for e in record.entries
        }
        group = _LiveGroup(settings, record.last_sequence, entries, index)
        for window in record.rate_windows:
            for at in window.delivered_wall_ms:
                group.add_delivery(window.key, at)
        self.groups[record.group] = group

    def apply_outcome(self, outcome: JournalRecord.Outcome) -> None:
        sequence = outcome.sequence
        for group in self.groups.values():
            if sequence > group.last_sequence:
                group.last_sequence = sequence
                group.entries[sequence] = _Item(outcome, 0, False)

    def apply_delivered(self, record: JournalRecord.GroupDelivered) -> None:
        group = self.groups.get(record.group)
        item = group.entries.get(record.sequence) if group is not None else None
        if item is not None:
            item.attempts = record.attempt
            item.lease_deadline = record.lease_deadline_wall_ms
            item.retry_at = 0
        if group is not None and record.delivered_wall_ms and group.state.rate_window_ms:
            group.add_delivery(record.rate_key, record.delivered_wall_ms)

    def apply_retry(self, record: JournalRecord.GroupRetry) -> None:
        group = self.groups.get(record.group)
        item = group.entries.get(record.sequence) if group is not None else None
        if item is not None:
            item.attempts = max(item.attempts, record.attempt)
            item.lease_deadline = 0
            item.retry_at = record.retry_at_wall_ms

    def apply_settled(self, record: JournalRecord.GroupSettled) -> None:
        group = self.groups.get(record.group)
        if group is None:
            return
        entries = group.entries
        disposition = record.disposition
        for sequence in record.sequences:
            if disposition == Settled.DISPOSITION_ACKED:
                entries.pop(sequence, None)
                continue
            item = entries.get(sequence)
            if item is None:
                continue
            item.lease_deadline = 0
            item.retry_at = 0
            if disposition == Settled.DISPOSITION_DEAD_LETTERED:
                item.dead = True
            elif disposition == Settled.DISPOSITION_REDRIVEN:
                item.dead = False
                item.redriven_at = item.attempts

    def carry(self, cutoff: int) -> list[JournalRecord]:
        """``group_state`` copies of every group anchored below ``cutoff`` (compaction)."""
        records = []
        for group in self.groups.values():
            if group.anchor >= cutoff:
                continue
            state = GroupState()
            state.CopyFrom(group.state)
            state.last_sequence = group.last_sequence
            state.source_index = group.anchor
            state.entries.extend(_entry(item) for _, item in sorted(group.entries.items()))
            state.rate_windows.extend(group.rate_windows())
            records.append(JournalRecord(group_state=state))
        return records

    def snapshot(self) -> dict[str, RecoveredGroup]:
        return {
            name: RecoveredGroup(
                group.state,
                group.last_sequence,
                tuple(_entry(item) for _, item in sorted(group.entries.items())),
                tuple(group.rate_windows()),
            )
            for name, group in self.groups.items()
        }


def _entry(item: _Item) -> Entry:
    return Entry(
        outcome=item.outcome,
        attempts=item.attempts,
        dead=item.dead,
        redriven_at=item.redriven_at,
        lease_deadline_wall_ms=item.lease_deadline,
        retry_at_wall_ms=item.retry_at,
    )
