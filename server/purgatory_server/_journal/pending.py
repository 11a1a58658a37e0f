"""What the journal keeps of each pending operation, and what it hands the server.

:mod:`.state` applies records; this holds a pending operation between records
(:class:`LiveOperation`, serialized: see :mod:`.state`), a key's watchers
(:class:`Watching`), and the shapes the server receives at start-up
(:class:`PendingOperation`, :class:`PendingView`).

Thread-safety: as :mod:`.state` (one owner thread); :class:`PendingOperation` is
immutable, and a :class:`PendingView` reflects its state only until the next record.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import NamedTuple

from purgatory_proto.v1.journal_pb2 import JournalRecord

__all__ = ["DEAD", "LiveOperation", "PendingOperation", "PendingView", "Watching"]

Registered = JournalRecord.OperationRegistered
Signal = JournalRecord.SignalApplied


class LiveOperation:
    """A pending operation as the builder tracks it (mutable; owned by the builder).

    ``raw`` is its ``OperationRegistered`` exactly as journaled (only a ``rescheduled``
    record rewrites it, with the new due time); ``raw_signals`` the ``SignalApplied``
    bytes of its progress, in journal order (None while it has none); compaction writes
    both back verbatim (:func:`.wire.carried_operation_payload`). ``keys`` are its
    distinct watch keys as journaled. ``anchor`` is the journal index of the record that
    currently defines it: its registration or the latest compaction copy. Deleting the
    segment holding the anchor requires carrying the operation forward first. Once the
    operation ends or a copy replaces it, ``anchor`` is ``DEAD`` (-1).
    """

    __slots__ = ("anchor", "keys", "raw", "raw_signals")

    def __init__(
        self, raw: bytes, keys: tuple[str, ...], raw_signals: list[bytes] | None, anchor: int
    ) -> None:
        self.raw = raw
        self.keys = keys
        self.raw_signals = raw_signals
        self.anchor = anchor

    @property
    def registration(self) -> Registered:
        """The registration, parsed (a new message on each access; for readers and tests)."""
        return Registered.FromString(self.raw)

    @property
    def signals(self) -> tuple[Signal, ...]:
        """The progress, parsed (new messages on each access)."""
        return tuple(Signal.FromString(s) for s in self.raw_signals or ())


class PendingOperation(NamedTuple):
    """A pending operation handed to the server at start-up.

    ``raw`` is its ``OperationRegistered`` as journaled (serialized: the server parses it
    once, into its own objects) and ``raw_signals`` the ``SignalApplied`` records applied
    to it so far, in the order they were applied. ``due_wall_ms`` is the absolute due
    time (epoch ms, the registration's ``due_wall_ms``): the server re-arms the timer
    there, or expires the operation at once if it is already past. ``keys`` are its
    distinct watch keys, the tuple the journal keeps (empty when unknown), which a server
    may share instead of a copy when equal to the registration's.
    """

    raw: bytes
    raw_signals: tuple[bytes, ...]
    due_wall_ms: int
    keys: tuple[str, ...] = ()

    @property
    def registration(self) -> Registered:
        """The registration, parsed (a new message on each access)."""
        return Registered.FromString(self.raw)

    @property
    def signals(self) -> tuple[Signal, ...]:
        """The progress, parsed (new messages on each access)."""
        return tuple(Signal.FromString(s) for s in self.raw_signals)


class PendingView(Mapping[str, PendingOperation]):
    """A start-up snapshot's pending operations, each :class:`PendingOperation` built when
    read (``items()`` is the fast way through) from the builder's own records.

    Why: objects built up front would fragment the server's heap for good; this holds
    only a copy of the id -> operation table and the due times. It is valid only until
    the next record is applied, which a journal's opening snapshot (read before the
    server appends) satisfies; :meth:`.state.JournalState.snapshot` copies fully otherwise.
    """

    __slots__ = ("_dues", "_ops")

    def __init__(self, ops: dict[str, LiveOperation], dues: dict[str, int]) -> None:
        self._ops = ops
        self._dues = dues

    def __getitem__(self, op_id: str) -> PendingOperation:
        live = self._ops[op_id]
        signals = tuple(live.raw_signals) if live.raw_signals else ()
        return PendingOperation(live.raw, signals, self._dues[op_id], live.keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __contains__(self, op_id: object) -> bool:
        return op_id in self._ops

    @property
    def due_times(self) -> Mapping[str, int]:
        """Each pending operation's due time, without building its PendingOperation."""
        return self._dues

    def items(self) -> Iterator[tuple[str, PendingOperation]]:  # type: ignore[override]
        dues = self._dues
        for op_id, live in self._ops.items():
            signals = tuple(live.raw_signals) if live.raw_signals else ()
            yield op_id, PendingOperation(live.raw, signals, dues[op_id], live.keys)


DEAD = -1  # the anchor of a LiveOperation that ended or was replaced


class Watching:
    """The pending operations watching one key, and its shared ``(key,)`` tuple.

    A list with dead entries left in place, not a set, for memory. An operation leaving
    (:meth:`.state.JournalState._unwatch`) only marks itself dead (``anchor == DEAD``) and
    lowers ``live``; the list is swept once dead entries outnumber the live ones (O(1)
    amortized removal, under twice the live count plus a few). Signals skip dead
    entries. An operation appears once per key.
    """

    __slots__ = ("live", "ops", "single")

    def __init__(self, key: str) -> None:
        self.single = (key,)
        self.ops: list[LiveOperation] = []
        self.live = 0

    def add(self, live: LiveOperation) -> None:
        self.ops.append(live)
        self.live += 1

    def remove(self) -> int:
        """One watcher (already marked dead) left; the number still watching."""
        self.live -= 1
        if len(self.ops) > 2 * self.live + 8:
            self.ops = [op for op in self.ops if op.anchor != DEAD]
        return self.live
