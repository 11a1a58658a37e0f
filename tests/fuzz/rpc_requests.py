"""What the RPC fuzz sends (tests/fuzz/test_fuzz_rpcs.py): hypothesis strategies for a
request of every RPC, well-formed with random and boundary values in every field, and for
raw bodies that may not decode at all.

Most draws are valid (:func:`mostly`: four in five), so that examples reach deep states
(operations that exist, complete, get forced); the rest probe every check: empty,
over-long and 48,000-character strings, int64/uint64 extremes, oversized repeated fields,
unknown purgatories, duplicate ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from purgatory_proto.v1 import purgatory_pb2 as pb

__all__ = ["METHODS", "raw_bodies", "requests"]

INT64 = (-(2**63), 2**63 - 1)
UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1
HUGE = "x" * 48_000


def mostly(valid: st.SearchStrategy[Any], fuzzy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` about four times in five: enough valid requests to reach deep states
    (operations that exist, complete, get forced), enough junk to probe every check."""
    return st.one_of(valid, valid, valid, valid, fuzzy)


purgatories = mostly(
    st.sampled_from(["default", "default", "fz-a"]),
    st.sampled_from(["fz-b", "nope", "", "bad name!", "p" * 200]),
)
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "k", "a" * 32, "a" * 33, "a" * 41, HUGE, "\x00", "é" * 40]),
)
keys = mostly(st.sampled_from(["k0", "k1", "k2", "k3"]), texts)
key_lists = mostly(
    st.lists(st.sampled_from(["k0", "k1", "k2", "k3"]), max_size=3, unique=True),
    st.one_of(
        st.lists(keys, max_size=5),
        st.sampled_from([[f"k{i}" for i in range(1025)], ["k0", "k0"], [HUGE]]),
    ),
)
op_ids = mostly(
    st.sampled_from(["op-1", "op-2", "op-3", "op-4", ""]),
    st.one_of(st.sampled_from(["i" * 41, HUGE]), texts),
)


def ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Any value in [low, high], with the boundaries (and 0, 1, -1) drawn often."""
    edges = sorted(e for e in {low, low + 1, -1, 0, 1, high - 1, high} if low <= e <= high)
    return st.one_of(st.integers(low, high), st.sampled_from(edges))


uint64s = ints(0, UINT64_MAX)
uint32s = ints(0, UINT32_MAX)
int64s = ints(*INT64)
timeouts = mostly(
    st.sampled_from([5, 50, 600_000]),
    st.one_of(st.sampled_from([0, 1, 4, 600_001, UINT64_MAX]), uint64s),
)
payloads = mostly(st.binary(max_size=64), st.sampled_from([b"p" * 65, b"p" * 65_537]))


@st.composite
def conditions(draw: Any) -> Any:
    kind = draw(st.sampled_from(["none", "none", "none", "any", "all", "min", "sum", "values"]))
    if kind == "none":
        return None
    if kind == "any":
        return pb.Condition(any_key=pb.AnyKeyCondition())
    if kind == "all":
        return pb.Condition(all_keys=pb.AllKeysCondition())
    if kind == "min":
        return pb.Condition(
            min_signals=pb.MinSignalsCondition(
                count=draw(mostly(st.integers(1, 3), uint32s)), distinct_sources=draw(st.booleans())
            )
        )
    if kind == "sum":
        return pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=draw(int64s)))
    targets = draw(st.dictionaries(keys, int64s, max_size=4))
    return pb.Condition(
        values_at_least=pb.ValuesAtLeastCondition(targets=targets, default_target=draw(int64s))
    )


@st.composite
def signals(draw: Any) -> Any:
    if draw(st.booleans()):
        return None
    sig = pb.Signal(
        amount=draw(mostly(st.integers(-10, 10**6), int64s)),
        source=draw(mostly(st.sampled_from(["", "r1", "r2"]), texts)),
        data=draw(mostly(st.binary(max_size=16), st.just(b"d" * 70_000))),
    )
    if draw(st.booleans()):
        sig.value = draw(int64s)
    return sig


# Absolute due times: past, near, beyond any horizon, and anything a uint64 holds.
due_times = st.one_of(
    st.sampled_from([1, int(time.time() * 1000) + 1000, UINT64_MAX]),
    st.integers(0, 2**64 - 1),
)


@st.composite
def specs(draw: Any) -> Any:
    if draw(st.integers(0, 2)):  # two in three: a plain valid operation
        return pb.OperationSpec(
            operation_id=draw(st.sampled_from(["", *(f"op-{i}" for i in range(1, 10))])),
            keys=draw(st.lists(st.sampled_from(["k0", "k1", "k2", "k3"]), max_size=3, unique=True)),
            timeout_ms=draw(st.sampled_from([5, 50, 600_000])),
            payload=draw(st.binary(max_size=8)),
        )
    spec = pb.OperationSpec(
        operation_id=draw(op_ids),
        keys=draw(key_lists),
        timeout_ms=draw(timeouts),
        payload=draw(payloads),
    )
    cond = draw(conditions())
    if cond is not None:
        spec.condition.CopyFrom(cond)
    return spec


schedule_ids = mostly(st.sampled_from(["s0", "s1", "s2"]), texts)


@st.composite
def schedule_requests(draw: Any, method: str, name: str) -> Any:
    """Schedules fire at most every minute here, so they add no churn to the server."""
    if method == "ListSchedules":
        return pb.ListSchedulesRequest(purgatory=name)
    if method == "DeleteSchedule":
        return pb.DeleteScheduleRequest(purgatory=name, schedule_id=draw(schedule_ids))
    spec = pb.ScheduleSpec(
        schedule_id=draw(schedule_ids),
        time_zone=draw(
            mostly(st.sampled_from(["", "Europe/Paris"]), st.sampled_from(["Europe", "X/Y", HUGE]))
        ),
        template=pb.ScheduleTemplate(keys=draw(key_lists), payload=draw(st.binary(max_size=8))),
    )
    cond = draw(conditions())
    if cond is not None:
        spec.template.condition.CopyFrom(cond)
    which = draw(st.integers(0, 2))
    if which == 0:
        spec.every_ms = draw(mostly(st.sampled_from([60_000, 3_600_000]), uint64s))
    elif which == 1:
        spec.cron = draw(mostly(st.sampled_from(["0 9 * * *", "*/5 * * * *", "@daily"]), texts))
    return pb.UpsertScheduleRequest(purgatory=name, schedule=spec)


# ------------------------------------------------------------------ one request per RPC
Draw = Callable[[st.SearchStrategy[Any]], Any]


def _create(draw: Draw, name: str) -> Any:
    config = pb.PurgatoryConfig(
        tick_ms=draw(mostly(st.sampled_from([0, 1, 60_000]), uint32s)),
        wheel_size=draw(mostly(st.sampled_from([0, 2, 4096]), uint32s)),
        purge_interval=draw(mostly(st.sampled_from([0, 1, 100]), uint32s)),
        max_pending=draw(mostly(st.sampled_from([0, 5, 100]), uint32s)),
        retained_events=draw(mostly(st.sampled_from([0, 1, 50]), uint32s)),
        durable=draw(st.booleans()),
    )
    return pb.CreatePurgatoryRequest(name=name, config=config)


def _delete(draw: Draw, name: str) -> Any:
    # "default" stays: most other examples need a purgatory that exists.
    return pb.DeletePurgatoryRequest(name=draw(st.sampled_from(["fz-a", "fz-b", "nope", ""])))


def _watch(draw: Draw, name: str) -> Any:
    spec = draw(specs())
    request = pb.TryCompleteElseWatchRequest(
        purgatory=name,
        operation_id=spec.operation_id,
        keys=spec.keys,
        timeout_ms=spec.timeout_ms,
        payload=spec.payload,
        wait=draw(st.sampled_from([False] * 19 + [True])),
    )
    if spec.HasField("condition"):
        request.condition.CopyFrom(spec.condition)
    if not draw(st.integers(0, 9)):
        request.due_time_ms = draw(due_times)
    return request


def _batch_watch(draw: Draw, name: str) -> Any:
    ops = draw(
        mostly(st.lists(specs(), min_size=1, max_size=4), st.just([pb.OperationSpec()] * 10_001))
    )
    return pb.BatchTryCompleteElseWatchRequest(purgatory=name, operations=ops)


def _signal(draw: Draw, name: str) -> Any:
    request = pb.CheckAndCompleteRequest(purgatory=name, key=draw(keys))
    sig = draw(signals())
    if sig is not None:
        request.signal.CopyFrom(sig)
    return request


def _batch_signal(draw: Draw, name: str) -> Any:
    items = []
    for key in draw(mostly(st.lists(keys, min_size=1, max_size=4), st.just(["k0"] * 10_001))):
        item = pb.KeySignal(key=key)
        sig = draw(signals())
        if sig is not None:
            item.signal.CopyFrom(sig)
        items.append(item)
    return pb.BatchCheckAndCompleteRequest(purgatory=name, signals=items)


def _cancel(draw: Draw, name: str) -> Any:
    which = draw(st.integers(0, 3))
    if which == 0:
        ids = pb.OperationIds(ids=draw(st.lists(op_ids, max_size=4)))
        return pb.CancelRequest(purgatory=name, operation_ids=ids)
    if which == 1:
        return pb.CancelRequest(purgatory=name, key=draw(keys))
    if which == 2:
        return pb.CancelRequest(purgatory=name, operation_id_prefix=draw(texts))
    return pb.CancelRequest(purgatory=name)


def _reschedule(draw: Draw, name: str) -> Any:
    request = pb.RescheduleRequest(purgatory=name, operation_id=draw(op_ids))
    which = draw(st.integers(0, 2))
    if which == 0:
        request.timeout_ms = draw(timeouts)
    elif which == 1:
        request.due_time_ms = draw(due_times)
    return request


def _group_rpc(method: str) -> Callable[[Draw, str], Any]:
    """Ack, Nack, AckBatch, ExtendLease, ListDeadLetters, Redrive, DiscardDeadLetters,
    DeleteGroup: a
    group's name, plus what each of them takes."""

    def build(draw: Draw, name: str) -> Any:
        request = GROUP_RPCS[method](
            purgatory=name, group=draw(st.sampled_from(["g", "", "bad name!", HUGE]))
        )
        if method in {"Ack", "ExtendLease", "Nack"}:
            request.sequence = draw(st.one_of(st.sampled_from([0, 1, UINT64_MAX]), uint64s))
            request.attempt = draw(st.one_of(st.sampled_from([0, 1]), uint32s))
        if method == "ExtendLease":
            request.visibility_timeout_ms = draw(uint32s)
        if method == "Nack":
            if draw(st.booleans()):
                request.delay_ms = draw(uint32s)
            request.dead_letter = draw(st.booleans())
        if method == "AckBatch":
            for _ in range(draw(st.integers(0, 3))):
                entry = request.entries.add(
                    sequence=draw(st.sampled_from([0, 1, 2, UINT64_MAX])),
                    attempt=draw(st.sampled_from([0, 1, 2])),
                    nack=draw(st.booleans()),
                    dead_letter=draw(st.booleans()),
                )
                if draw(st.booleans()):
                    entry.delay_ms = draw(uint32s)
        if method == "ListDeadLetters":
            request.after_sequence = draw(uint64s)
            request.page_size = draw(uint32s)
        if method in {"Redrive", "DiscardDeadLetters"}:
            request.sequences.extend(draw(st.lists(uint64s, max_size=4)))
        if method == "DiscardDeadLetters":
            request.all = draw(st.booleans())
        return request

    return build


def _subscribe(draw: Draw, name: str) -> Any:
    request = pb.SubscribeRequest(
        purgatory=name,
        incarnation=draw(st.sampled_from(["", "0123456789abcdef", HUGE])),
        filter=pb.SubscribeFilter(
            states=draw(st.lists(st.integers(0, 7), max_size=3)),
            keys=draw(key_lists),
            operation_id_prefix=draw(texts),
        ),
    )
    if draw(st.booleans()):
        request.after_sequence = draw(st.one_of(st.sampled_from([0, 1, UINT64_MAX]), uint64s))
    return request


def _schedule_rpc(method: str) -> Callable[[Draw, str], Any]:
    return lambda draw, name: draw(schedule_requests(method, name))


GROUP_RPCS = {
    "Ack": pb.AckRequest,
    "ExtendLease": pb.ExtendLeaseRequest,
    "ListDeadLetters": pb.ListDeadLettersRequest,
    "Redrive": pb.RedriveRequest,
    "DiscardDeadLetters": pb.DiscardDeadLettersRequest,
    "DeleteGroup": pb.DeleteGroupRequest,
    "Nack": pb.NackRequest,
    "AckBatch": pb.AckBatchRequest,
}
BUILDERS: dict[str, Callable[[Draw, str], Any]] = {
    "CreatePurgatory": _create,
    "DeletePurgatory": _delete,
    "ListPurgatories": lambda draw, name: pb.ListPurgatoriesRequest(),
    "GetPurgatory": lambda draw, name: pb.GetPurgatoryRequest(name=name),
    "TryCompleteElseWatch": _watch,
    "BatchTryCompleteElseWatch": _batch_watch,
    "CheckAndComplete": _signal,
    "BatchCheckAndComplete": _batch_signal,
    "ForceComplete": lambda draw, name: pb.ForceCompleteRequest(
        purgatory=name, operation_id=draw(op_ids)
    ),
    "GetOperation": lambda draw, name: pb.GetOperationRequest(
        purgatory=name, operation_id=draw(op_ids)
    ),
    "Cancel": _cancel,
    "Reschedule": _reschedule,
    "Subscribe": _subscribe,
    "ListGroups": lambda draw, name: pb.ListGroupsRequest(purgatory=name),
    **{m: _schedule_rpc(m) for m in ("UpsertSchedule", "DeleteSchedule", "ListSchedules")},
    **{m: _group_rpc(m) for m in GROUP_RPCS},
}
METHODS = sorted(BUILDERS)


@st.composite
def requests(draw: Any) -> tuple[str, Any]:
    """(RPC name, request message) for any RPC the fuzz covers."""
    method = draw(st.sampled_from(METHODS))
    name = draw(purgatories)
    return method, BUILDERS[method](draw, name)


raw_bodies = st.tuples(
    st.sampled_from(METHODS),
    st.one_of(
        st.binary(max_size=64),
        st.sampled_from([b"\x0a\x02\xff\xfe", b"\x12\x03\xc3\x28a", b"\x0a\x05ab", b"\xff" * 8]),
    ),
)
