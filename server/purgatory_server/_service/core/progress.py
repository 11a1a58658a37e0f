"""The per-operation progress that a condition is judged on.

A remote operation cannot run caller code in ``try_complete``, so it carries a
:class:`~purgatory_server._service.model.conditions.ConditionSpec` instead, evaluated
against the signals its keys receive. Values known before registration count for
``VALUES_AT_LEAST`` (:mod:`.latest_values`).

:class:`Progress` is the mutable accumulator of one operation. Thread safety: touched
only under its operation's lock (``try_complete`` and ``on_complete`` both hold it), so
it has no lock of its own. Everything it keeps is bounded by the limits; accumulated data
is shared between operations, not copied (:mod:`.signal_data`).

:class:`Gated` wraps a :class:`Progress` for a condition with a gate (expressions,
``match``): a signal counts only if its ``match`` attribute equals the operation's and
its ``filter`` holds; the ``predicate`` is judged once per change of the progress after
the kind holds. Conditions without a gate never meet it (no work for the feature).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cel

from purgatory_server._service.core.signal_data import Charges, DataLink
from purgatory_server._service.model.attributes import Attributes, JsonValue, split_path
from purgatory_server._service.model.conditions import (
    EMPTY_RESULT,
    EMPTY_SIGNAL,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    ConditionKind,
    ConditionSpec,
    Gate,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.model.errors import LimitExceeded
from purgatory_server._service.model.expressions import (
    WHOLE,
    Reads,
    Whole,
    bind,
    gate_programs,
    holds,
    holds_with,
    project,
)

__all__ = [
    "VERDICTS",
    "FirstSignal",
    "Gated",
    "Progress",
    "check_data_room",
    "make_progress",
    "operation_context",
    "signal_context",
]


class Progress:
    """The signals one operation has received so far, and whether its condition holds."""

    __slots__ = (
        "_anonymous",
        "_data_limit",
        "_keys",
        "_link",
        "_sources",
        "_sources_limit",
        "_targets",
        "_unmet",
        "amount_sum",
        "signal_count",
        "signalled",
        "spec",
        "values",
    )

    def __init__(
        self,
        spec: ConditionSpec,
        keys: Sequence[str],
        known_values: Mapping[str, int],
        *,
        data_limit: int,
        sources_limit: int,
        data_root: DataLink | None = None,
    ) -> None:
        self.spec = spec
        self._keys = keys
        self.signal_count = 0
        self._anonymous = 0
        self._sources: dict[str, None] = {}
        self._sources_limit = sources_limit
        self.signalled: dict[str, None] = {}
        self.amount_sum = 0
        self.values: dict[str, int] = dict(known_values)
        # The shared chain of signal data received so far (.signal_data).
        self._link = data_root if data_root is not None else _UNCHARGED_ROOT
        self._data_limit = data_limit
        # VALUES_AT_LEAST: keys whose value is still below target (kept incrementally so a
        # signal costs O(1), not O(keys)).
        self._targets = dict(spec.targets)
        self._unmet: set[str] = set()
        if spec.kind is ConditionKind.VALUES_AT_LEAST:
            self._unmet = {
                k for k in keys if (v := self.values.get(k)) is None or v < self._target(k)
            }

    def _target(self, key: str) -> int:
        return self._targets.get(key, self.spec.default_target)

    def add(self, key: str, signal: SignalRecord) -> Progress:
        """Account for ``signal`` received on ``key``; the progress to keep (``self``)."""
        self.signal_count += 1
        self.signalled[key] = None
        total = self.amount_sum + signal.amount
        # Saturate: the sum is an int64 on the wire and in the journal (docs/service.md).
        self.amount_sum = INT64_MAX if total > INT64_MAX else max(total, INT64_MIN)
        if signal.source:
            if signal.source not in self._sources and len(self._sources) < self._sources_limit:
                self._sources[signal.source] = None
        else:
            self._anonymous += 1
        if signal.value is not None:
            self.values[key] = signal.value
            if self.spec.kind is ConditionKind.VALUES_AT_LEAST:
                if signal.value >= self._target(key):
                    self._unmet.discard(key)
                else:
                    self._unmet.add(key)
        if signal.data:
            self._link = self._link.add(signal, self._data_limit)
        return self

    def counted(self) -> int:
        """Signals that count: distinct sources (plus anonymous ones) if asked, else all."""
        if self.spec.distinct_sources:
            return len(self._sources) + self._anonymous
        return self.signal_count

    def satisfied(self) -> bool:
        spec = self.spec
        kind = spec.kind
        if kind is ConditionKind.ANY_KEY:
            return self.signal_count > 0
        if kind is ConditionKind.ALL_KEYS:
            return len(self.signalled) >= len(self._keys)
        if kind is ConditionKind.MIN_SIGNALS:
            return self.counted() >= spec.count
        if kind is ConditionKind.SUM_AT_LEAST:
            return self.amount_sum >= spec.threshold
        return not self._unmet

    def context(self) -> dict[str, JsonValue]:
        """The ``result`` variable of a predicate: this progress as JSON values."""
        return {
            "signal_count": self.counted(),
            "sources": list(self._sources),
            "signalled_keys": list(self.signalled),
            "amount_sum": self.amount_sum,
            "values": dict(self.values),
        }

    def snapshot(self) -> ResultSnapshot:
        if not self.signal_count and not self.values:
            return EMPTY_RESULT
        return ResultSnapshot(
            signal_count=min(self.counted(), UINT32_MAX),
            sources=tuple(self._sources),
            signalled_keys=tuple(self.signalled),
            amount_sum=self.amount_sum,
            values=tuple(self.values.items()),
            data=self._link.data(),
            data_truncated=self._link.truncated,
        )


class FirstSignal:
    """Progress of an ``ANY_KEY`` operation: the first signal decides, so keep only it.

    ``ANY_KEY`` is the default condition and never accumulates anything, so the general
    :class:`Progress` is overhead there. Same interface and same snapshot as
    :class:`Progress` fed the same single signal.

    Immutable: :meth:`add` returns the progress to keep, a new one for the first signal
    and ``self`` after it, so all pending ``ANY_KEY`` operations share one unsignalled
    instance (:func:`make_progress`). Thread safety: as :class:`Progress`.
    """

    __slots__ = ("_data_limit", "_sources_limit", "key", "signal")

    def __init__(
        self,
        *,
        data_limit: int,
        sources_limit: int,
        key: str | None = None,
        signal: SignalRecord = EMPTY_SIGNAL,
    ) -> None:
        self._data_limit = data_limit
        self._sources_limit = sources_limit
        self.key = key
        self.signal = signal

    def add(self, key: str, signal: SignalRecord) -> FirstSignal:
        if self.key is not None:  # later signals cannot change an ANY_KEY outcome
            return self
        return FirstSignal(
            data_limit=self._data_limit, sources_limit=self._sources_limit, key=key, signal=signal
        )

    def satisfied(self) -> bool:
        return self.key is not None

    def snapshot(self) -> ResultSnapshot:
        key = self.key
        if key is None:
            return EMPTY_RESULT
        sig = self.signal
        if sig is EMPTY_SIGNAL:
            return ResultSnapshot(1, (), (key,))
        data = sig.data
        truncated = len(data) > self._data_limit
        return ResultSnapshot(
            signal_count=1,
            sources=(sig.source,) if sig.source and self._sources_limit > 0 else (),
            signalled_keys=(key,),
            amount_sum=sig.amount,
            values=((key, sig.value),) if sig.value is not None else (),
            data=data[: max(self._data_limit, 0)] if truncated else data,
            data_truncated=truncated,
        )


class Gated:
    """Progress of a condition with a gate: what counts passes ``match`` and ``filter``.

    Same interface as :class:`Progress` (which it wraps, whatever the kind); its
    snapshot also names the last signal that counted (``matched_key``, ``matched``).
    Thread safety: as :class:`Progress`.
    """

    __slots__ = (
        "_bound",
        "_filter",
        "_inner",
        "_judged",
        "_match",
        "_path",
        "_predicate",
        "_reads",
        "_result_reads",
        "matched",
        "matched_key",
    )

    def __init__(
        self, inner: Progress | FirstSignal, gate: Gate, operation_id: str, keys: Sequence[str]
    ) -> None:
        self._inner = inner
        programs = gate_programs(gate.filter, gate.predicate)
        # The ``op`` variable (what the expressions read of it), converted into the
        # library's values once: conversion is most of an evaluation (.expressions).
        op_reads = programs.op_reads
        self._bound = None
        if op_reads:
            op = operation_context(operation_id, keys, gate.attributes)
            self._bound = bind({"op": project(op, op_reads)})
        self._filter = programs.filter
        self._reads = programs.signal_reads
        self._predicate = programs.predicate
        self._result_reads = programs.result_reads
        self._path: tuple[str, ...] | None = None
        self._match: str | None = None
        if gate.match:
            self._path = split_path(gate.match)
            attributes = gate.attributes
            self._match = None if attributes is None else attributes.canonical_at(self._path)
        # The verdict for the progress as it is (None: to be judged).
        self._judged: bool | None = None
        self.matched_key = ""
        self.matched: Attributes | None = None

    def add(self, key: str, signal: SignalRecord) -> Gated:
        path = self._path
        if path is not None:
            attributes = signal.attributes
            if attributes is None or attributes.canonical_at(path) != self._match:
                return self
        check = self._filter
        if check is not None:
            context = signal_context(key, signal, self._reads)
            bound = self._bound
            if bound is not None:
                passed = holds_with(check, bound, "signal", context)
            else:
                passed = self._verdict(check, context)
            if not passed:
                return self
        self._inner = self._inner.add(key, signal)
        self._judged = None
        self.matched_key = key
        self.matched = signal.attributes
        return self

    def _verdict(self, check: cel.Program, context: dict[str, JsonValue]) -> bool:
        """The filter on ``context`` (it reads nothing of ``op``): its verdicts are kept
        by the program and the short scalar values it reads (:data:`_VERDICTS`), so a
        signal like an earlier one costs no conversion into the library's values (most
        of an evaluation, .expressions)."""
        found: list[object] = [check]
        if not _leaves(context, self._reads, found) or len(found) > _KEPT_VALUES:
            return holds(check, {"signal": context})
        key = tuple(found)
        verdict = _VERDICTS.get(key)
        if verdict is None:
            verdict = holds(check, {"signal": context})
            if len(_VERDICTS) >= VERDICTS:
                _VERDICTS.clear()
            _VERDICTS[key] = verdict
        return verdict

    def satisfied(self) -> bool:
        judged = self._judged
        if judged is None:
            judged = self._inner.satisfied()
            predicate = self._predicate
            inner = self._inner
            if judged and predicate is not None and isinstance(inner, Progress):
                result = project(inner.context(), self._result_reads)
                bound = self._bound
                judged = (
                    holds(predicate, {"result": result})
                    if bound is None
                    else holds_with(predicate, bound, "result", result)
                )
            self._judged = judged
        return judged

    def snapshot(self) -> ResultSnapshot:
        s = self._inner.snapshot()
        if not self.matched_key:
            return s
        # Field by field: a NamedTuple's ``_replace`` goes through ``_make`` and a dict.
        return ResultSnapshot(
            s.signal_count,
            s.sources,
            s.signalled_keys,
            s.amount_sum,
            s.values,
            s.data,
            s.data_truncated,
            self.matched_key,
            self.matched,
        )


_SCALARS = (str, int, float, bool, type(None))
# Kept verdicts of the filters that read nothing of ``op``: (program, the values read) ->
# verdict, for every purgatory of the server, at most VERDICTS of them (then it starts
# again), none with a string over _KEPT_CHARS or more than _KEPT_VALUES parts, so it
# stays within a few MiB whatever
# clients send: a bounded memo of a pure function, like the compile cache. Shared
# across threads: a dict's get and set are atomic, a race costs a repeated evaluation.
VERDICTS = 4096
_VERDICTS: dict[tuple[object, ...], bool] = {}
_KEPT_CHARS = 64
# A kept key's parts, at most: the program, then 8 values read (each its type and value;
# an absent one is a single marker).
_KEPT_VALUES = 17


def _leaves(value: JsonValue, read: Reads | Whole, out: list[object]) -> bool:
    """Append to ``out`` what ``read`` names of ``value``, each leaf as its type and value
    (``1`` and ``true`` differ in CEL), an absent field as None; False where a leaf is
    not a scalar (a list, an object) or is a string over _KEPT_CHARS: no key is kept."""
    if isinstance(read, Whole) or not isinstance(value, dict):
        if not isinstance(value, _SCALARS) or (isinstance(value, str) and len(value) > _KEPT_CHARS):
            return False
        out.append(type(value))
        out.append(value)
        return True
    for name, sub in read.items():
        if name in value:
            if not _leaves(value[name], sub, out):
                return False
        else:
            out.append(None)
    return True


def signal_context(
    key: str, signal: SignalRecord, read: Reads | Whole = WHOLE
) -> dict[str, JsonValue]:
    """The ``signal`` variable of a filter: what ``read`` names of it."""
    attributes = {} if signal.attributes is None else signal.attributes.value
    if isinstance(read, Whole):
        return {
            "key": key,
            "amount": signal.amount,
            "value": signal.value,
            "source": signal.source,
            "attributes": attributes,
        }
    out: dict[str, JsonValue] = {}
    for field, sub in read.items():
        if field == "attributes":
            out[field] = project(attributes, sub)
        elif field == "key":
            out[field] = key
        elif field == "amount":
            out[field] = signal.amount
        elif field == "value":
            out[field] = signal.value
        elif field == "source":
            out[field] = signal.source
    return out


def operation_context(
    operation_id: str, keys: Sequence[str], attributes: Attributes | None
) -> dict[str, JsonValue]:
    """The ``op`` variable of a filter or a predicate."""
    return {
        "id": operation_id,
        "keys": list(keys),
        "attributes": {} if attributes is None else attributes.value,
    }


# The chain of progress made without a purgatory's (charged) root: tests, tools.
_UNCHARGED_ROOT = DataLink.root(None)
# The unsignalled FirstSignal per (data_limit, sources_limit): a server has one or two.
_UNSIGNALLED: dict[tuple[int, int], FirstSignal] = {}


def make_progress(
    spec: ConditionSpec,
    keys: Sequence[str],
    known_values: Mapping[str, int],
    *,
    data_limit: int,
    sources_limit: int,
    data_root: DataLink | None = None,
    operation_id: str = "",
) -> Progress | FirstSignal | Gated:
    """The progress object for ``spec``: the shared unsignalled :class:`FirstSignal` for
    ``ANY_KEY``; others accumulate signal data on ``data_root``'s chain (the purgatory's,
    charged to its budget), a :class:`Gated` one for a condition with a gate (its ``op``
    variable names ``operation_id``). Callers keep what ``add`` returns."""
    gate = spec.gate
    if gate is not None:
        inner: Progress | FirstSignal
        if spec.kind is ConditionKind.ANY_KEY and not gate.predicate:
            # The first signal that passes decides: nothing to accumulate.
            inner = FirstSignal(data_limit=data_limit, sources_limit=sources_limit)
        else:
            inner = Progress(
                spec,
                keys,
                known_values,
                data_limit=data_limit,
                sources_limit=sources_limit,
                data_root=data_root,
            )
        return Gated(inner, gate, operation_id, keys)
    if spec.kind is ConditionKind.ANY_KEY:
        shared = _UNSIGNALLED.get((data_limit, sources_limit))
        if shared is None:
            shared = FirstSignal(data_limit=data_limit, sources_limit=sources_limit)
            if len(_UNSIGNALLED) < 64:
                _UNSIGNALLED[(data_limit, sources_limit)] = shared
        return shared
    return Progress(
        spec,
        keys,
        known_values,
        data_limit=data_limit,
        sources_limit=sources_limit,
        data_root=data_root,
    )


def check_data_room(
    charges: Charges,
    signals: Sequence[tuple[str, SignalRecord]],
    watchers: Callable[[str], Sequence[Any]],
) -> None:
    """Refuse (LimitExceeded, from ``charges.check_room``) signals whose data would be
    kept and does not fit now. Only a watcher whose condition accumulates (a
    :class:`Progress`) keeps data: an ``ANY_KEY`` one ends on the signal (its outcome is
    the retained pool's), so a signal on a key without such a watcher is never refused,
    and a full purgatory can always be signalled to end its operations. Loop thread."""
    data = sum(len(sig.data) for _, sig in signals)
    if not data:
        return
    try:
        charges.check_room(data)
    except LimitExceeded:
        for key, sig in signals:
            if sig.data and any(not isinstance(op.progress, FirstSignal) for op in watchers(key)):
                raise
