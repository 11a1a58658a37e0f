"""The dedup window: finished operation ids remembered for a time, bounded in bytes.

Why by time: a client re-sends seconds to minutes later, however many other operations
ended meanwhile; a memory of the last N ids forgets sooner under a burst. So an id is
remembered for ``window_ms`` after its outcome (``Outcome.complete_time_ms``, the
server's wall clock), like SQS's deduplication interval, and a re-send inside the window
answers with the recorded outcome.

Bounded in bytes too: past ``max_bytes`` the oldest entries go first, even inside their
window; each such early eviction is counted (:attr:`FinishedIds.evicted_early`, exported
as ``purgatory.dedup.evicted``). Expired entries are dropped lazily, as later outcomes
arrive: an id may be remembered longer than the window, never shorter (unless the byte
cap evicts it).

:func:`entry_bytes` counts what an entry keeps alive: the id, the payload, the keys
(copied into the entry), the result data (shared) and a fixed overhead.

Each entry is one plain tuple (:func:`pack`) rather than the definition and outcome
records, which the cyclic collector would track (several objects per id, walked by every
full collection; docs/benchmarks.md, "The collector's pauses"); a tuple of strings,
numbers and bytes is untracked. The records are rebuilt on a lookup
(:meth:`FinishedIds.get`) and for a listing.

The order is a deque of the ids beside a plain dict by id (cheaper to add to and pop
from than an ``OrderedDict``; the ids are the outcomes' own strings). An id is in the deque
once: one finished again (a restart's replay) moves to the back.

Thread safety: loop-confined, like the operation table that owns it.
"""

from __future__ import annotations

import marshal
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator

from purgatory_server._service.model.attributes import Attributes, JsonValue
from purgatory_server._service.model.conditions import (
    DEFAULT_CONDITION,
    EMPTY_RESULT,
    ConditionKind,
    ConditionSpec,
    Gate,
    ResultSnapshot,
)
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome

__all__ = ["ENTRY_OVERHEAD", "FinishedIds", "Packed", "entry_bytes", "pack", "unpack"]

# Bytes of the Python objects behind one entry besides its strings and bytes (the
# OrderedDict node, the packed tuple, its marshalled part).
ENTRY_OVERHEAD = 400

Entry = tuple[OperationDefinition, Outcome]

_Values = tuple[tuple[str, int], ...]
# The result's fields but its data (kept by reference: one signal's data may be shared
# by many outcomes, see core.signal_data, and marshal would copy it into each).
# An Attributes as (raw, value): marshal keeps JSON values as they are.
_Attrs = tuple[bytes, dict[str, JsonValue]] | None
# The result's fields; an operation with a gate adds its matched key and attributes.
_Result = (
    tuple[int, tuple[str, ...], tuple[str, ...], int, _Values, bool]
    | tuple[int, tuple[str, ...], tuple[str, ...], int, _Values, bool, str, _Attrs]
)
_Gate = tuple[str, str, str, _Attrs] | None
_Condition = tuple[str, int, bool, int, _Values, int, _Gate]
# The nested parts, marshalled: the outcome's and the definition's keys, the result's
# fields (None: empty) and the condition's (None: the default).
_Nested = tuple[tuple[str, ...], tuple[str, ...], _Result | None, _Condition | None]
# One remembered id (module docstring): complete time, entry bytes, the outcome's state (its
# number) and due time (what a listing filters on), its sequence, purgatory, payload,
# create time, traceparent and nbytes; the definition's timeout, payload, due time and
# debounce fields; the result's data; then the nested tuples as one bytes object
# (:mod:`marshal`; the keys are copied into it, and charged: :func:`entry_bytes`). Nested
# tuples would keep the entry tracked: the collector untracks a tuple only when it finds
# every item untracked, and it may reach the entry before the tuples inside it.
Packed = tuple[
    int,
    int,
    int,
    int,
    int,
    str,
    bytes,
    int,
    str,
    int,
    int,
    bytes,
    int,
    bool,
    int,
    bytes,
    bytes,
]
_dumps = marshal.dumps


def pack(definition: OperationDefinition, outcome: Outcome, size: int) -> Packed:
    """``definition`` and ``outcome`` (of ``size`` entry bytes) as one plain tuple."""
    r = outcome.result
    result: _Result | None = None
    if r is not EMPTY_RESULT and (r.signal_count or r != EMPTY_RESULT):
        result = (
            r.signal_count,
            r.sources,
            r.signalled_keys,
            r.amount_sum,
            r.values,
            r.data_truncated,
        )
        if r.matched_key:  # an operation with a gate: which signal matched
            result = (*result, r.matched_key, _attrs(r.matched))
    c = definition.condition
    condition: _Condition | None = None
    if c is not DEFAULT_CONDITION and (c.gate is not None or c != DEFAULT_CONDITION):
        condition = (
            c.kind.value,
            c.count,
            c.distinct_sources,
            c.threshold,
            c.targets,
            c.default_target,
            _gate(c.gate),
        )
    nested: _Nested = (outcome.keys, definition.keys, result, condition)
    return (
        outcome.complete_time_ms,
        size,
        int(outcome.state),
        outcome.due_time_ms,
        outcome.sequence,
        outcome.purgatory,
        outcome.payload,
        outcome.create_time_ms,
        outcome.traceparent,
        outcome.nbytes,
        definition.timeout_ms,
        definition.payload,
        definition.due_time_ms,
        definition.extend_on_resend,
        definition.max_extend_ms,
        r.data,
        _dumps(nested),
    )


def unpack(op_id: str, p: Packed) -> Entry:
    """The records :func:`pack` took apart (equal to them, not the same objects)."""
    keys, definition_keys, r, c = _nested(p)
    result = EMPTY_RESULT
    if r is not None:
        result = ResultSnapshot(r[0], r[1], r[2], r[3], r[4], p[15], r[5])
        if len(r) > 6:
            result = result._replace(matched_key=r[6], matched=_attributes(r[7]))
    state = OperationState(p[2])
    outcome = Outcome(p[4], p[5], op_id, state, keys, p[6], result, p[7], p[3], p[0], p[8], p[9])
    condition = DEFAULT_CONDITION
    if c is not None:
        g = c[6]
        gate = None if g is None else Gate(g[0], g[1], g[2], _attributes(g[3]))
        condition = ConditionSpec(ConditionKind(c[0]), c[1], c[2], c[3], c[4], c[5], gate)
    definition = OperationDefinition(definition_keys, p[10], condition, p[11], p[12], p[13], p[14])
    return definition, outcome


def _attrs(attributes: Attributes | None) -> _Attrs:
    return None if attributes is None else (attributes.raw, attributes.value)


def _attributes(packed: _Attrs) -> Attributes | None:
    return None if packed is None else Attributes(packed[0], packed[1])


def _gate(gate: Gate | None) -> _Gate:
    if gate is None:
        return None
    return (gate.filter, gate.predicate, gate.match, _attrs(gate.attributes))


def _nested(p: Packed) -> _Nested:
    nested: _Nested = marshal.loads(p[16])
    return nested


def entry_bytes(definition: OperationDefinition, outcome: Outcome) -> int:
    """The estimated bytes one remembered id keeps alive."""
    size = ENTRY_OVERHEAD + len(outcome.operation_id) + len(definition.payload)
    result = outcome.result
    size += len(result.data)
    condition = definition.condition
    if condition is not DEFAULT_CONDITION and condition.gate is not None:
        gate = condition.gate
        size += len(gate.filter) + len(gate.predicate) + len(gate.match)
        if gate.attributes is not None:  # the encoding and the value: about twice its bytes
            size += 2 * len(gate.attributes.raw)
        if result.matched is not None:
            size += 2 * len(result.matched.raw) + len(result.matched_key)
    for key in definition.keys:
        size += len(key) + 8
    return size


class FinishedIds:
    """Finished ids -> their (definition, outcome), packed, oldest first (module doc)."""

    __slots__ = ("_order", "bytes", "entries", "evicted_early", "max_bytes", "window_ms")

    def __init__(self, window_ms: int, max_bytes: int) -> None:
        self.window_ms = window_ms
        self.max_bytes = max_bytes
        # Id -> its packed entry (read-only for others; changed only here).
        self.entries: dict[str, Packed] = {}
        # The ids, oldest first.
        self._order: deque[str] = deque()
        self.bytes = 0
        # Entries the byte cap dropped while still inside their window.
        self.evicted_early = 0

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, op_id: object) -> bool:
        return op_id in self.entries

    @property
    def enabled(self) -> bool:
        return self.window_ms > 0 and self.max_bytes > 0

    def get(self, op_id: str) -> Entry | None:
        packed = self.entries.get(op_id)
        return None if packed is None else unpack(op_id, packed)

    def listed(
        self,
        after: str | None,
        states: Collection[OperationState],
        matches: Callable[[tuple[str, ...], str, int], bool],
    ) -> Iterator[tuple[str, Outcome]]:
        """The outcomes of ids after ``after`` in ``states`` that ``matches(keys, id,
        due_time_ms)`` accepts (unsorted); only those are rebuilt."""
        for op_id, p in self.entries.items():
            if (
                (after is None or op_id > after)
                and p[2] in states
                and matches(_nested(p)[0], op_id, p[3])
            ):
                yield op_id, unpack(op_id, p)[1]

    def add(self, definition: OperationDefinition, outcome: Outcome) -> None:
        """Remember one finished id (a later outcome of the same id replaces it)."""
        self.add_many(((definition, outcome),))

    def add_many(self, ended: Iterable[Entry]) -> None:
        """Remember each finished id of ``ended`` (one call per published batch)."""
        if not self.enabled:
            return
        entries = self.entries
        order = self._order
        append = order.append
        added = 0
        for definition, outcome in ended:
            op_id = outcome.operation_id
            old = entries.pop(op_id, None)
            if old is not None:  # (rare: a restart replaying a re-used id)
                added -= old[1]
                order.remove(op_id)
            size = entry_bytes(definition, outcome)
            entries[op_id] = pack(definition, outcome, size)
            append(op_id)
            added += size
        self.bytes += added

    def _pop_oldest(self) -> int:
        """Forget the oldest entry; its bytes (the caller knows there is one)."""
        freed = self.entries.pop(self._order.popleft())[1]
        self.bytes -= freed
        return freed

    def pop_oldest(self) -> int:
        """Forget the oldest entry (the memory budget's shedding); the bytes freed, 0 if
        empty. Counted as an early eviction: it may still be inside its window."""
        if not self._order:
            return 0
        self.evicted_early += 1
        return self._pop_oldest()

    def trim(self) -> None:
        """Forget what is past the window (relative to the newest outcome) and, oldest
        first, what is over the byte cap."""
        order = self._order
        if not order:
            return
        entries = self.entries
        horizon = entries[order[-1]][0] - self.window_ms
        while order:
            oldest = entries[order[0]][0]
            if self.bytes <= self.max_bytes and oldest >= horizon:
                return
            self._pop_oldest()
            if oldest >= horizon:
                self.evicted_early += 1
