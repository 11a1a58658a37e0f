"""What an operation waits for and what it was given: conditions, signals, results.

The kinds (:class:`ConditionKind`):

- ``ANY_KEY``: the first signal on any watched key (a plain long-poll, a wake-up);
- ``ALL_KEYS``: every watched key signalled at least once (every partition acknowledged);
- ``MIN_SIGNALS``: at least ``count`` signals; with ``distinct_sources`` each non-empty
  ``source`` counts once (DelayedProduce: acks from N replicas). Signals with an empty
  source cannot be told apart, so each of them counts;
- ``SUM_AT_LEAST``: the sum of ``amount`` reaches ``threshold`` (DelayedFetch: min bytes);
- ``VALUES_AT_LEAST``: every watched key's latest ``value`` is >= its target (replicas
  reached an offset); values known before registration count.

Any kind may carry a :class:`Gate` (docs/conditions.md): a CEL ``filter`` on the signals
that count, a ``predicate`` judged once the kind holds, a ``match`` attribute path, and
the operation's own attributes those read.

Frozen values, safe to share between threads; how progress towards a condition is kept
is the core's (``core.progress``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from purgatory_server._service.model.attributes import Attributes

__all__ = [
    "DEFAULT_CONDITION",
    "EMPTY_RESULT",
    "EMPTY_SIGNAL",
    "INT64_MAX",
    "INT64_MIN",
    "UINT32_MAX",
    "ConditionKind",
    "ConditionSpec",
    "Gate",
    "ResultSnapshot",
    "SignalRecord",
]

# Wire ranges of OperationResult.amount_sum (int64) and .signal_count (uint32).
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
UINT32_MAX = 2**32 - 1


class ConditionKind(enum.Enum):
    ANY_KEY = "any_key"
    ALL_KEYS = "all_keys"
    MIN_SIGNALS = "min_signals"
    SUM_AT_LEAST = "sum_at_least"
    VALUES_AT_LEAST = "values_at_least"


class Gate(NamedTuple):
    """A condition's expressions (texts, checked at registration) and the operation's
    attributes; "" / None: not set. A tuple: built once per registration that has one,
    cheaper than a frozen dataclass."""

    filter: str = ""
    predicate: str = ""
    # A dotted attribute path ("order.id").
    match: str = ""
    attributes: Attributes | None = None


class ConditionSpec(NamedTuple):
    """A condition; hashable and comparable so re-sent definitions can be compared. A
    tuple, like :class:`Gate`: a frozen dataclass's ``__init__`` costs a microsecond and
    more per registration that names a condition."""

    kind: ConditionKind = ConditionKind.ANY_KEY
    # Shadows ``tuple.count``, which nothing calls on a condition.
    count: int = 0  # type: ignore[assignment]
    distinct_sources: bool = False
    threshold: int = 0
    # Sorted (key, target) pairs; keys not listed use default_target.
    targets: tuple[tuple[str, int], ...] = ()
    default_target: int = 0
    # Expressions and the operation's attributes (None: the kind alone).
    gate: Gate | None = None


@dataclass(frozen=True, slots=True)
class SignalRecord:
    """One signal on a key, as recorded by CheckAndComplete."""

    amount: int = 0
    value: int | None = None
    source: str = ""
    data: bytes = b""
    attributes: Attributes | None = None


class ResultSnapshot(NamedTuple):
    """What satisfied (or did not satisfy) an operation, frozen at its end."""

    signal_count: int = 0
    sources: tuple[str, ...] = ()
    signalled_keys: tuple[str, ...] = ()
    amount_sum: int = 0
    values: tuple[tuple[str, int], ...] = ()
    data: bytes = b""
    data_truncated: bool = False
    # Operations with a gate: the key and attributes of the last signal that counted.
    matched_key: str = ""
    matched: Attributes | None = None


EMPTY_RESULT = ResultSnapshot()
# The condition of an operation that names none (any key): one shared instance, so the
# hot paths can tell it by identity.
DEFAULT_CONDITION = ConditionSpec()
# The signal of a CheckAndComplete that sent none (a bare wake-up); shared, it is immutable.
EMPTY_SIGNAL = SignalRecord()
