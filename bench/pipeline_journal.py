"""A synthetic journal of N records in the server's exact format, for the pipeline benchmark.

Why synthetic and not recorded from a live server: producing 10 million records through
the gRPC server would take most of an hour on this machine and measure the server, not
the pipeline. The records are built with the server's own framing (``encode_header``,
``encode_frame``) and the real protobuf messages, with the shape a replicated-write
workload gives: a registration, a few signals from replicas, an outcome per operation
(mostly completed, some expired with lateness, a few force-completed).

``python -m bench.pipeline_journal OUT_DIR RECORDS`` writes ``OUT_DIR/bench/journal/``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from purgatory_proto.v1 import journal_pb2, purgatory_pb2
from purgatory_server._journal.framing import (
    HEADER_BYTES,
    decode_frame,
    encode_frame,
    encode_header,
)
from purgatory_server._journal.segments import segment_name

JR = journal_pb2.JournalRecord
SEGMENT_BYTES = 64 << 20
BASE_MS = 1_790_000_000_000


def _records(n: int, purgatory: str, seed: int = 7, prefix: str = "op"):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    conditions = [
        purgatory_pb2.Condition(any_key=purgatory_pb2.AnyKeyCondition()),
        purgatory_pb2.Condition(
            min_signals=purgatory_pb2.MinSignalsCondition(count=2, distinct_sources=True)
        ),
        purgatory_pb2.Condition(sum_at_least=purgatory_pb2.SumAtLeastCondition(threshold=100)),
    ]
    produced, sequence, op = 0, 0, 0
    now = BASE_MS
    while produced < n:
        op += 1
        now += rng.randint(0, 20)
        op_id = f"{prefix}-{op}"
        keys = [f"topic-{rng.randint(0, 999)}"]
        cond = conditions[op % 3]
        timeout = 30_000
        yield JR(
            registered=JR.OperationRegistered(
                purgatory=purgatory,
                operation_id=op_id,
                keys=keys,
                timeout_ms=timeout,
                condition=cond.SerializeToString(),
                created_wall_ms=now,
                due_wall_ms=now + timeout,
            )
        )
        produced += 1
        signals = rng.randint(0, 3)
        sources = []
        for s in range(signals):
            if produced >= n:
                return
            source = f"replica-{s}"
            sources.append(source)
            yield JR(
                signal=JR.SignalApplied(
                    purgatory=purgatory,
                    key=keys[0],
                    amount=rng.randint(1, 60),
                    source=source,
                    applied_wall_ms=now + rng.randint(1, 50),
                )
            )
            produced += 1
        if produced >= n:
            return
        roll = rng.random()
        state, lateness, ended = JR.Outcome.STATE_COMPLETED, 0, now + rng.randint(1, 60)
        if signals == 0 and roll < 0.8:
            state, lateness = JR.Outcome.STATE_EXPIRED, rng.randint(0, 12)
            ended = now + timeout + lateness
        elif roll > 0.97:
            state = JR.Outcome.STATE_FORCE_COMPLETED
        sequence += 1
        event = purgatory_pb2.OperationEvent(
            sequence=sequence,
            purgatory=purgatory,
            operation_id=op_id,
            state=int(state),
            keys=keys,
            result=purgatory_pb2.OperationResult(signal_count=signals, sources=sources),
            create_time_ms=now,
            due_time_ms=now + timeout,
            complete_time_ms=ended,
        )
        journaled = purgatory_pb2.JournaledOutcome(event=event, condition=cond, timeout_ms=timeout)
        yield JR(
            outcome=JR.Outcome(
                purgatory=purgatory,
                operation_id=op_id,
                state=state,
                result=journaled.SerializeToString(),
                sequence=sequence,
                completed_wall_ms=ended,
                lateness_ms=lateness,
            )
        )
        produced += 1


def write_journal_sized(
    directory: Path, n: int, segment_bytes: int, purgatory: str = "bench"
) -> int:
    """Write ``n`` records as segments of at most ``segment_bytes``; return the bytes written."""
    directory.mkdir(parents=True, exist_ok=True)
    total, base = 0, 0
    chunks: list[bytes] = []
    size = 24
    for index, record in enumerate(_records(n, purgatory)):
        frame = encode_frame(record.SerializeToString())
        if size + len(frame) > segment_bytes and chunks:
            total += _flush(directory, base, chunks)
            base, chunks, size = index, [], 24
        chunks.append(frame)
        size += len(frame)
    if chunks:
        total += _flush(directory, base, chunks)
    return total


def append_segment(directory: Path, n: int, purgatory: str = "bench") -> int:
    """Add one segment of ``n`` new records after the journal's last; return its bytes.

    As the server does when it rolls over: the next base index, a new file, the same
    purgatory. Its first record moves the deadline of the last operation the previous
    segment registered (an operation outliving a roll-over: an incremental ingest must
    rewrite that operation's row where it lives); the rest are new operations (ids
    ``added-N``).
    """
    last = max(directory.glob("*.seg"))
    payloads = _payloads(last.read_bytes())
    base = int(last.stem) + len(payloads)
    pending = _last_registered(payloads)
    frames = []
    if pending is not None:
        settle = JR(
            rescheduled=JR.OperationRescheduled(
                purgatory=purgatory, operation_id=pending, due_wall_ms=BASE_MS
            )
        )
        frames.append(encode_frame(settle.SerializeToString()))
    records = _records(n - len(frames), purgatory, seed=11, prefix="added")
    frames += [encode_frame(r.SerializeToString()) for r in records]
    return _flush(directory, base, frames)


def _payloads(data: bytes) -> list[memoryview]:
    """Every record of one segment this module wrote (the journal library's framing)."""
    view, offset, payloads = memoryview(data), HEADER_BYTES, []
    while offset < len(view):
        frame = decode_frame(view, offset)
        payloads.append(frame.payload)
        offset = frame.end
    return payloads


def _last_registered(payloads: list[memoryview]) -> str | None:
    """The id of the segment's last registration (parsed from the end: it is near it)."""
    for payload in reversed(payloads):
        record = JR.FromString(bytes(payload))
        if record.HasField("registered"):
            return str(record.registered.operation_id)
    return None


def write_journal(directory: Path, n: int, purgatory: str = "bench") -> int:
    """Write ``n`` records as segments of at most ``SEGMENT_BYTES``; return the bytes written."""
    return write_journal_sized(directory, n, SEGMENT_BYTES, purgatory)


def _flush(directory: Path, base: int, chunks: list[bytes]) -> int:
    data = encode_header(base) + b"".join(chunks)
    (directory / segment_name(base)).write_bytes(data)
    return len(data)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pipeline_journal",
        description="Write a synthetic journal of RECORDS records to OUT_DIR/bench/journal/.",
    )
    parser.add_argument("out_dir", type=Path, help="the data directory to write into")
    parser.add_argument("records", type=int, help="how many journal records to write")
    args = parser.parse_args()
    if args.records < 1:
        parser.error(f"records must be at least 1, got {args.records}")
    out = args.out_dir / "bench" / "journal"
    written = write_journal(out, args.records)
    print(f"wrote {args.records} records, {written / 1e6:.1f} MB, to {out}")


if __name__ == "__main__":
    main()
