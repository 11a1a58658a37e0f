"""Expected values computed in plain Python from the server's own reading of the journal."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1.journal_pb2 import JournalRecord

STATE = {2: "COMPLETED", 3: "EXPIRED", 4: "FORCE_COMPLETED", 5: "CANCELLED"}


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default; Spark's percentile)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lo, hi = math.floor(position), math.ceil(position)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def operations(records: list[tuple[int, JournalRecord]]) -> dict[str, dict[str, Any]]:
    ops: dict[str, dict[str, Any]] = {}
    for index, record in records:
        kind = record.WhichOneof("record")
        if kind == "registered":
            reg = record.registered
            condition = pb.Condition.FromString(reg.condition).WhichOneof("kind") or "any_key"
            ops.setdefault(
                reg.operation_id,
                {
                    "keys": list(reg.keys),
                    "created": reg.created_wall_ms,
                    "condition": condition,
                    "reg_index": index,
                    "state": "WATCHING",
                    "out_index": None,
                    "registered_due": reg.due_wall_ms,
                    "due": reg.due_wall_ms,
                    "rescheduled": 0,
                },
            )
        elif kind == "rescheduled":
            moved = record.rescheduled
            op = ops[moved.operation_id]
            if op["out_index"] is None:  # only a pending operation's deadline moves
                op["due"] = moved.due_wall_ms
                op["rescheduled"] += 1
        elif kind == "outcome":
            out = record.outcome
            op = ops[out.operation_id]
            if op["out_index"] is None:
                op.update(
                    state=STATE[out.state],
                    ended=out.completed_wall_ms,
                    lateness=out.lateness_ms,
                    out_index=index,
                )
    return ops


def signals(records: list[tuple[int, JournalRecord]]) -> list[tuple[int, Any]]:
    return [(i, r.signal) for i, r in records if r.WhichOneof("record") == "signal"]


def top(counter: Counter[str], n: int = 20) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def ack_latencies(records: list[tuple[int, JournalRecord]]) -> dict[str, list[int]]:
    """Per source: first-signal latency for each MIN_SIGNALS operation it signalled."""
    ops = operations(records)
    sigs = signals(records)
    out: dict[str, list[int]] = defaultdict(list)
    for op in ops.values():
        if op["condition"] != "min_signals":
            continue
        first: dict[str, int] = {}
        for index, sig in sigs:
            if sig.key not in op["keys"] or index <= op["reg_index"]:
                continue
            if op["out_index"] is not None and index >= op["out_index"]:
                continue
            first.setdefault(sig.source, sig.applied_wall_ms)
        for source, at in first.items():
            out[source].append(at - op["created"])
    return out
