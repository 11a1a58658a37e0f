"""Micro-benchmark of the Session's outbound packing: building outcome messages in place
from keywords (``session_messages.pack``) against building each ``OperationEvent`` as a
message and passing it to the ``SessionResponse`` constructor (which copies it), the form
the first version used. Both then serialise, as the writer does.

One signal frame's worth per iteration: an acknowledgement with 100 per-signal counts
and the 100 outcomes it completed. Medians of ``--repeats`` runs, microseconds per outcome,
in one process, side by side.

    python -m bench.session_pack_bench [--repeats 9] [--iterations 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.api.session_messages import Ack, pack
from purgatory_server._service.model.conditions import ResultSnapshot
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import event_to_proto

RESULT = ResultSnapshot(signal_count=1, signalled_keys=("k",))
OUTCOMES = [
    Outcome(i, "default", f"op-{i}", OperationState.COMPLETED, (f"k{i}",), b"", RESULT, 1, 2, 3)
    for i in range(100)
]


def by_copy() -> list[Any]:
    ack = pb.SessionAck(request_id=1, completed_per_signal=[1] * 100)
    events = [event_to_proto(o) for o in OUTCOMES]
    return [pb.SessionResponse(ack=ack, outcomes=events)]


def in_place() -> list[Any]:
    ack = Ack(1)
    ack.message.completed_per_signal.extend([1] * 100)
    out: deque[Ack | Outcome] = deque(OUTCOMES)
    out.append(ack)
    return pack(out)


def measure(build: Callable[[], list[Any]], iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        for message in build():
            message.SerializeToString()
    return (time.perf_counter() - start) / iterations / len(OUTCOMES) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--iterations", type=int, default=300)
    a = parser.parse_args()
    copy_us, place_us = [], []
    for _ in range(a.repeats):  # interleaved, so both see the same machine load
        copy_us.append(measure(by_copy, a.iterations))
        place_us.append(measure(in_place, a.iterations))
    ratios = [c / p for c, p in zip(copy_us, place_us, strict=True)]
    print(f"message argument (copied): {statistics.median(copy_us):.2f} us/outcome")
    print(f"in place from keywords:    {statistics.median(place_us):.2f} us/outcome")
    print(f"ratio (median of per-run ratios): {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
