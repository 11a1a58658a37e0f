"""What the things a client can make the server hold cost in memory, in bytes.

The byte budget (``core.budget``) charges estimates from lengths the request already
carries, not ``sys.getsizeof`` walks. The constants are CPython's costs on a 64-bit build
(``python -m bench.memory_budget_bench --sizes``), rounded up, so the budget errs towards
charging more than is held:

- a pending operation: its object, its table and timer entries (``OPERATION_BYTES``),
  plus per key the string and its watch entry in the engine (``KEY_BYTES`` + the key's
  length), plus its payload and id;
- a condition that accumulates (every kind but ``ANY_KEY``): its progress object;
- a condition's gate (expressions, attributes, match keys): :func:`gate_bytes`;
- a retained outcome (the retained window, the finished-id memory): the outcome tuple,
  its keys (string + tuple slot each), payload, result data and sources.

Thread safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING

from purgatory_server._service.model.conditions import (
    DEFAULT_CONDITION,
    ConditionKind,
    Gate,
    ResultSnapshot,
)

if TYPE_CHECKING:
    from purgatory_server._service.model.definitions import OperationDefinition
    from purgatory_server._service.model.outcome import Outcome

__all__ = [
    "CONTEXT_BYTES",
    "KEY_BYTES",
    "OPERATION_BYTES",
    "OUTCOME_BYTES",
    "PROGRESS_BYTES",
    "gate_bytes",
    "operation_bytes",
    "outcome_bytes",
    "outcomes_bytes",
    "result_bytes",
]

# A pending operation without its keys, id, payload and progress (RemoteOperation,
# TimerTaskEntry, the pending-table and timer-bucket slots, its definition tuple).
OPERATION_BYTES = 1024
# Per watched key beyond its characters: the str header and the engine's watch entry
# (the most per watch is for a key two operations watch; more share it further).
KEY_BYTES = 256
# The accumulating progress of a non-ANY_KEY condition (its dicts, set and counters).
PROGRESS_BYTES = 1024
# A retained outcome without its keys, payload and result: the Outcome and ResultSnapshot
# tuples, its deque or dict slot, the operation id's str header.
OUTCOME_BYTES = 512
# Per key of a retained outcome beyond its characters: the str header and tuple slot.
RETAINED_KEY_BYTES = 64
# Per (key, value) pair of a result's values: the pair, the int, the tuple slot.
VALUE_BYTES = 112
# An operation's bound expression context (cel.Context) beyond its values: 1.6 KB
# measured for one attribute (docs/benchmarks.md §25).
CONTEXT_BYTES = 2048
# Attributes: the decoded value (dicts, strings, numbers) against its encoding's bytes.
ATTRIBUTES_FACTOR = 4
# A match key (core.match_index) beyond the engine's watch entry: the tuple, the
# canonical value string, the index's counters.
MATCH_KEY_BYTES = 256
_ANY_KEY = ConditionKind.ANY_KEY
_NBYTES = itemgetter(11)  # Outcome.nbytes


def keys_bytes(keys: Sequence[str], per_key: int) -> int:
    return sum(map(len, keys)) + per_key * len(keys)


def operation_bytes(operation_id: str, definition: OperationDefinition) -> int:
    """What a new pending operation holds (its accumulated signal data is charged as it
    arrives, once per shared link: see .signal_data)."""
    keys = definition[0]
    size = OPERATION_BYTES + len(operation_id) + len(definition[3]) + KEY_BYTES * len(keys)
    size += len(keys[0]) if len(keys) == 1 else sum(map(len, keys))
    condition = definition[2]
    if condition is DEFAULT_CONDITION:
        return size
    if condition.kind is not _ANY_KEY:
        size += PROGRESS_BYTES + len(condition.targets) * RETAINED_KEY_BYTES
    gate = condition.gate
    if gate is not None:
        size += gate_bytes(gate, keys)
    return size


def gate_bytes(gate: Gate, keys: Sequence[str]) -> int:
    """What a condition's gate holds: its progress, its texts (the compiled programs are
    shared per text), its bound context, the attributes (encoding and value) and, with
    ``match``, a match key per key (a tuple, its value string, its watch entry)."""
    size = PROGRESS_BYTES + len(gate.filter) + len(gate.predicate) + len(gate.match)
    size += CONTEXT_BYTES  # the operation's bound expression context (model.expressions)
    if gate.attributes is not None:
        # The encoding, the value, and the value again in the bound context.
        size += (ATTRIBUTES_FACTOR + 2) * len(gate.attributes.raw)
    if gate.match:
        size += len(keys) * (KEY_BYTES + MATCH_KEY_BYTES)
    return size


def outcome_bytes(outcome: Outcome) -> int:
    """What one retained outcome holds (charged in full by each memory that keeps it):
    the figure the feed computed once when it published it, else computed now."""
    return outcome[11] or result_bytes(outcome[2], outcome[4], outcome[5], outcome[6])


def outcomes_bytes(outcomes: Iterable[Outcome]) -> int:
    """The sum of :func:`outcome_bytes` over ``outcomes``: a C-level sum of the figures
    the feed computed, unless one has none."""
    outcomes = tuple(outcomes)
    if all(map(_NBYTES, outcomes)):
        return sum(map(_NBYTES, outcomes))
    return sum(map(outcome_bytes, outcomes))


def result_bytes(
    operation_id: str, keys: Sequence[str], payload: bytes, result: ResultSnapshot
) -> int:
    """What an outcome of these parts holds (computed once per outcome, when published)."""
    size = OUTCOME_BYTES + len(operation_id) + len(payload) + RETAINED_KEY_BYTES * len(keys)
    size += len(keys[0]) if len(keys) == 1 else sum(map(len, keys))
    if result.signal_count:  # not the empty result
        size += len(result.data) + 8 * len(result.signalled_keys)
        if result.sources:
            size += keys_bytes(result.sources, RETAINED_KEY_BYTES)
    if result.values:
        size += VALUE_BYTES * len(result.values)
    if result.matched is not None:
        size += ATTRIBUTES_FACTOR * len(result.matched.raw)
    return size
