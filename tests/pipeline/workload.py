"""The known workload whose journal the pipeline tests analyse (real server, one restart).

Phase 1 (first server process): every condition kind, signals from several sources,
a force-complete, short timers that expire while the server runs, and two long timers that
are still pending when the server stops. The server stays down past their due time, so on
restart they expire at once with a lateness of about the downtime. Phase 2 (second
process): a few more operations, two of them rescheduled (one before it completes; the
pending one by a debounced re-send and then by ``Reschedule``). Afterwards a torn frame
is appended to the last segment, as a crash in the middle of a write would leave it.
"""

from __future__ import annotations

import time
from pathlib import Path

from purgatory_proto.v1 import purgatory_pb2 as pb

from tests.pipeline.servers import NAME, Client, Server

__all__ = ["NAME", "produce", "tear_tail"]

DOWNTIME_S = 1.5
SHORT_TIMEOUT_MS = 300
TORN_BYTES = 37  # a frame header announcing 100 bytes, followed by only 29 of them


def _min2() -> pb.Condition:
    return pb.Condition(min_signals=pb.MinSignalsCondition(count=2, distinct_sources=True))


def phase_one(c: Client) -> None:
    # any_key: five waiters on one hot key, woken by one signal.
    for i in range(5):
        c.watch(f"any-{i}", ["hot"], 60_000)
    c.signal("hot", source="r1")
    # all_keys over two keys.
    c.watch("all-0", ["x", "y"], 60_000, pb.Condition(all_keys=pb.AllKeysCondition()))
    c.signal("x", source="r1")
    c.signal("y", source="r2")
    # N-acks: MIN_SIGNALS(2, distinct) on partition keys, acknowledged by r1 then r2/r3.
    for i in range(4):
        c.watch(f"acks-{i}", [f"p{i}"], 60_000, _min2())
    for i in range(4):
        c.signal(f"p{i}", source="r1")
        time.sleep(0.01)
        c.signal(f"p{i}", source="r2" if i % 2 == 0 else "r3")
    # sum_at_least: 4 + 4 + 4 >= 10.
    c.watch(
        "sum-0", ["bytes"], 60_000, pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=10))
    )
    for _ in range(3):
        c.signal("bytes", amount=4, source="r1")
    # values_at_least: offset 5 reached.
    c.watch(
        "val-0",
        ["off"],
        60_000,
        pb.Condition(values_at_least=pb.ValuesAtLeastCondition(default_target=5)),
    )
    c.signal("off", value=5, source="r2")
    # force-complete.
    c.watch("force-0", ["never"], 60_000)
    c.force("force-0")
    # short timers on a cold key: expire while the server runs.
    for i in range(4):
        c.watch(f"exp-{i}", ["cold", "hot2"], SHORT_TIMEOUT_MS)
    # long timers: still pending when the server stops, expired at restart.
    for i in range(2):
        c.watch(f"late-{i}", ["slow"], 800)


# Reschedule targets, relative to each operation's creation (server wall clock).
RESCHEDULED_BY_MS = {"any-after": 120_000, "pending-0": 1_000_000}


def phase_two(c: Client) -> None:
    created = int(c.watch("any-after", ["hot"], 60_000).create_time_ms)
    c.reschedule("any-after", created + RESCHEDULED_BY_MS["any-after"])
    c.signal("hot", source="r1")
    # Still watching at the end; its deadline moved twice.
    created = int(c.watch("pending-0", ["quiet"], 600_000, extend_on_resend=True).create_time_ms)
    time.sleep(0.02)  # so the re-send's now + timeout lies past the first deadline
    c.watch("pending-0", ["quiet"], 600_000, extend_on_resend=True)  # debounced re-send
    c.reschedule("pending-0", created + RESCHEDULED_BY_MS["pending-0"])


def produce(data_dir: Path) -> Server:
    """Run the workload with one restart; returns the (stopped) server."""
    server = Server(data_dir, durable=True).start()
    client = Client(server.target)
    try:
        phase_one(client)
        # 12 completions + 1 force-complete + 4 short expiries
        client.wait_last_sequence(17)
    finally:
        client.close()
    server.stop()
    time.sleep(DOWNTIME_S)  # the long timers fall due while the server is down
    server.start()
    client = Client(server.target)
    try:
        client.wait_last_sequence(19)  # the two late-* expired at restart
        phase_two(client)
        client.wait_last_sequence(20)
    finally:
        client.close()
    server.stop()
    return server


def tear_tail(journal_dir: Path) -> Path:
    """Append a torn frame (header + part of its payload) to the last segment."""
    last = sorted(journal_dir.glob("*.seg"))[-1]
    with last.open("ab") as f:
        f.write((0xDEADBEEF).to_bytes(4, "little") + (100).to_bytes(4, "little") + b"\x0a" * 29)
    return last
