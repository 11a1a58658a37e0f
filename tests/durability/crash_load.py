"""The crash test's server process, concurrent load and record of acknowledgements.

:class:`DurableServer` runs ``python -m purgatory_server`` on a data directory (under the
tests' harness, :class:`harness.ServerProcess`). :class:`Acks` records only what a client
was told (a response received): acknowledged watches with their due time, outcomes reported in
responses, events subscribers received, and for "probe" operations (a private key each,
``MIN_SIGNALS(4)``) how many of their signals were acknowledged and whether one was in
flight when the server died. :func:`run_load` drives watchers, signallers, a forcer and
a subscriber against one server until it is killed.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from harness import ServerProcess

NAME = "d"
KEYS = [f"k{i}" for i in range(8)]
PROBE_COUNT = 4  # a probe completes on its 4th signal
LONG_MS = 120_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class DurableServer(ServerProcess):
    """A server process on ``data_dir`` with one durable purgatory, started at once; its
    output appended to ``<log's folder>/<log's stem>.log`` (``server.log`` stays
    ``server.log``), across restarts too. Bounded waits, SIGKILL or SIGTERM, a restart on
    the same port: :class:`harness.ServerProcess`."""

    def __init__(self, data_dir: Path, fsync: str, log: Path) -> None:
        args = ["--data-dir", str(data_dir), "--purgatory", NAME, "--durable"]
        args += ["--fsync", fsync, "--log-level", "WARNING"]
        env = {"PURGATORY_DEFAULTS_RETAINED_EVENTS": "1000000"}
        super().__init__(log.parent, args, label=log.stem, env=env, start_timeout_s=15)
        self.start()


@dataclass
class Watch:
    op_id: str
    due_ms: int
    probe: bool


@dataclass
class Acks:
    """What clients were told; the crash test checks the restarted server against it."""

    watches: dict[str, Watch] = field(default_factory=dict)
    outcomes: dict[str, tuple[int, int]] = field(default_factory=dict)  # op -> (seq, state)
    seen: dict[int, tuple[str, int]] = field(default_factory=dict)  # seq -> (op, state)
    probe_acked: dict[str, int] = field(default_factory=dict)
    probe_in_flight: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    counter: int = 0
    # Totals over the run, for the summary line.
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        self.stats[what] = self.stats.get(what, 0) + n

    def outcome(self, op_id: str, sequence: int, state: int) -> None:
        if not sequence:
            return
        old = self.outcomes.setdefault(op_id, (sequence, state))
        if old != (sequence, state):
            self.errors.append(f"{op_id}: told {old} and then {(sequence, state)}")

    def event(self, sequence: int, op_id: str, state: int) -> None:
        old = self.seen.setdefault(sequence, (op_id, state))
        if old != (op_id, state):
            self.errors.append(f"sequence {sequence}: {old} and then {(op_id, state)}")


def _condition(rng: random.Random) -> Any:
    kind = rng.randrange(5)
    if kind == 0:
        return pb.Condition(any_key=pb.AnyKeyCondition())
    if kind == 1:
        return pb.Condition(all_keys=pb.AllKeysCondition())
    if kind == 2:
        return pb.Condition(
            min_signals=pb.MinSignalsCondition(
                count=rng.randint(2, 5), distinct_sources=rng.random() < 0.5
            )
        )
    if kind == 3:
        return pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=rng.randint(5, 40)))
    return pb.Condition(
        values_at_least=pb.ValuesAtLeastCondition(default_target=rng.randint(10, 80))
    )


async def _watcher(stub: Any, acks: Acks, rng: random.Random, cycle: int) -> None:
    while True:
        acks.counter += 1
        op_id = f"c{cycle}-{acks.counter}"
        probe = rng.random() < 0.2
        if probe:
            keys = [f"p-{op_id}"]
            condition = pb.Condition(min_signals=pb.MinSignalsCondition(count=PROBE_COUNT))
            timeout = LONG_MS
        else:
            keys = rng.sample(KEYS, rng.randint(1, 3))
            condition = _condition(rng)
            timeout = rng.randint(30, 600) if rng.random() < 0.6 else LONG_MS
        response = await stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory=NAME,
                operation_id=op_id,
                keys=keys,
                timeout_ms=timeout,
                condition=condition,
            )
        )
        acks.watches[op_id] = Watch(op_id, response.due_time_ms, probe)
        acks.count("watches acknowledged")
        acks.outcome(op_id, response.sequence, response.state)
        if probe:
            acks.probe_acked[op_id] = 0
            acks.probe_in_flight[op_id] = 0


async def _signaller(stub: Any, acks: Acks, rng: random.Random) -> None:
    while True:
        probes = [
            p
            for p, n in acks.probe_acked.items()
            if n < PROBE_COUNT - 1 and not acks.probe_in_flight[p]
        ]
        if probes and rng.random() < 0.4:
            op_id = rng.choice(probes)
            acks.probe_in_flight[op_id] = 1
            await stub.CheckAndComplete(
                pb.CheckAndCompleteRequest(
                    purgatory=NAME, key=f"p-{op_id}", signal=pb.Signal(amount=1, source="p")
                )
            )
            acks.probe_acked[op_id] += 1
            acks.count("signals acknowledged")
            acks.probe_in_flight[op_id] = 0
            continue
        sig = pb.Signal(amount=rng.randint(1, 5), source=f"r{rng.randrange(4)}")
        if rng.random() < 0.5:
            sig.value = rng.randint(0, 100)
        await stub.CheckAndComplete(
            pb.CheckAndCompleteRequest(purgatory=NAME, key=rng.choice(KEYS), signal=sig)
        )
        acks.count("signals acknowledged")


async def _forcer(stub: Any, acks: Acks, rng: random.Random) -> None:
    while True:
        shared = [w.op_id for w in acks.watches.values() if not w.probe]
        if not shared:
            await asyncio.sleep(0.005)
            continue
        op_id = rng.choice(shared[-200:])
        response = await stub.ForceComplete(
            pb.ForceCompleteRequest(purgatory=NAME, operation_id=op_id)
        )
        acks.outcome(op_id, response.operation.sequence, response.operation.state)
        acks.count("force-completes acknowledged")
        await asyncio.sleep(0.002)


async def _subscriber(stub: Any, acks: Acks) -> None:
    after = max(acks.seen, default=0)
    call = stub.Subscribe(pb.SubscribeRequest(purgatory=NAME, after_sequence=after))
    try:
        async for event in call:
            acks.event(event.sequence, event.operation_id, event.state)
            acks.count("events received by subscribers")
    finally:
        call.cancel()


async def run_load(
    port: int, acks: Acks, rng: random.Random, cycle: int, kill: ServerProcess
) -> int:
    """Load the server until ``kill`` is SIGKILLed at a random moment (0.2-1.0 s);
    returns the wall-clock ms just before the kill."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    workers = [
        _watcher(stub, acks, random.Random(rng.random()), cycle),
        _watcher(stub, acks, random.Random(rng.random()), cycle),
        _signaller(stub, acks, random.Random(rng.random())),
        _signaller(stub, acks, random.Random(rng.random())),
        _forcer(stub, acks, random.Random(rng.random())),
        _subscriber(stub, acks),
    ]
    tasks = [asyncio.ensure_future(w) for w in workers]
    try:
        await asyncio.sleep(rng.uniform(0.2, 1.0))
        killed_ms = now_ms()
        kill.kill()
        done = await asyncio.wait(tasks, timeout=10)
        for task in done[0]:
            exc = task.exception()
            if not isinstance(exc, grpc.aio.AioRpcError):
                raise AssertionError(f"load worker ended with {exc!r}")
        if done[1]:
            raise AssertionError("load workers did not stop after the kill")
        return killed_ms
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await channel.close()
