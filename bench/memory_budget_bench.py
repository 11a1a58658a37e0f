"""Memory under abuse (issue 22, patterns 3-5) and what the memory budget charges.

**Patterns** (each on a fresh server process; peak RSS over the RSS after warm-up, from
``/proc/<pid>/status``: ``VmHWM`` minus ``VmRSS``):

- **3, shared signal data**: ``--ops`` (2,000) pending operations on one key
  (``min_signals(10)``), then 4 signals of 64 KiB on that key;
- **4, keys**: up to ``--key-ops`` (400) operations of 1,024 distinct 256-character keys,
  one per request; refused ones (RESOURCE_EXHAUSTED) counted;
- **5, retained outcomes**: ``--purgatories`` (30) purgatories created with
  ``retained_events=1,000,000`` (refused ones counted), then in each, ``--rounds`` (4) of 25
  operations with 64 KiB payloads completed by a signal.

Between steps a well-behaved client watches and signals a key on another purgatory; the
column says whether it was always served. This tree runs with ``memory_budget_bytes``
(``--budget-mib``, 64); with ``--compare-src DIR`` (e.g. ``git archive <commit> | tar -x
-C DIR``; its engine as that tree has it, compiled if built there with ``setup.py
build_ext --inplace``) the same patterns run against that tree's server too, in the same
run, with the same configuration less the budget's options (which it does not know).

**Fan-out** (``--fanout N``): N Subscribe streams read while ``--fanout-outcomes`` (500)
outcomes of 32 KiB are produced (batches of 50 completed by one signal); the server's CPU
seconds (``/proc``) and the wall time until every stream had them all. Each outcome is
encoded once for all streams in this tree, once per stream before.

**Charges** (``--sizes``, in process): operations of several shapes registered in one
purgatory under ``tracemalloc``; per operation, the bytes it holds (traced, plus its keys,
id and payload, allocated before tracing started) next to what :mod:`.sizes` charges.

    python -m bench.memory_budget_bench [--compare-src DIR] [--sizes] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from purgatory_client import (
    Condition,
    OperationSpec,
    PurgatoryClient,
    PurgatoryConfig,
    PurgatoryError,
    ResourceExhaustedError,
    Signal,
)

from bench._common import markdown_table, tree_pythonpath
from harness import ServerProcess

MIB = 1 << 20


def _config(budget_mib: int | None) -> str:
    limits = f"[limits]\nmemory_budget_bytes = {budget_mib * MIB}\n" if budget_mib else ""
    return f'{limits}[[purgatories]]\nname = "default"\n[[purgatories]]\nname = "other"\n'


class Run:
    """One pattern against one server: the client, the probe, the counts."""

    def __init__(self, client: PurgatoryClient) -> None:
        self.client = client
        self.accepted = self.refused = 0
        self.probes = self.probes_ok = 0

    def probe(self) -> None:
        self.probes += 1
        key = f"probe-{self.probes}"
        try:
            self.client.try_complete_else_watch([key], 60_000, purgatory="other")
            if self.client.check_and_complete(key, purgatory="other") == 1:
                self.probes_ok += 1
        except PurgatoryError:
            pass

    def attempt(self, call: Callable[..., object], *args: object, **kwargs: object) -> None:
        try:
            call(*args, **kwargs)
            self.accepted += 1
        except ResourceExhaustedError:
            self.refused += 1


def pattern_3(run: Run, a: argparse.Namespace) -> None:
    condition = Condition.min_signals(10)
    for start in range(0, a.ops, 500):
        specs = [
            OperationSpec(("hot",), 600_000, condition) for _ in range(min(500, a.ops - start))
        ]
        run.attempt(run.client.batch_try_complete_else_watch, specs)
    for n in range(4):
        run.attempt(
            lambda n=n: run.client.check_and_complete("hot", Signal(data=bytes([n]) * 65536))
        )
        run.probe()


def pattern_4(run: Run, a: argparse.Namespace) -> None:
    for n in range(a.key_ops):
        keys = [f"{n:04d}-{k:04d}-".ljust(256, "k") for k in range(1024)]
        run.attempt(run.client.try_complete_else_watch, keys, 600_000)
        if n % 50 == 0:
            run.probe()


def pattern_5(run: Run, a: argparse.Namespace) -> None:
    created = []
    for i in range(a.purgatories):
        name = f"wide-{i}"
        config = PurgatoryConfig(retained_events=1_000_000)
        try:
            run.client.create_purgatory(name, config)
            created.append(name)
        except ResourceExhaustedError:
            run.refused += 1
    payload = os.urandom(65536)
    for _ in range(a.rounds):
        for name in created:
            specs = [
                OperationSpec(("k",), 600_000, payload=payload[:-1] + bytes([i])) for i in range(25)
            ]
            run.attempt(run.client.batch_try_complete_else_watch, specs, purgatory=name)
            run.client.check_and_complete("k", purgatory=name)
        run.probe()


PATTERNS = {
    "3 shared signal data": pattern_3,
    "4 keys": pattern_4,
    "5 retained outcomes": pattern_5,
}


def measure(root: Path, label: str, env: dict[str, str], budget: int | None, a) -> list[list]:  # type: ignore[no-untyped-def]
    rows = []
    for name, pattern in PATTERNS.items():
        with (
            ServerProcess(
                root, ["--log-level", "WARNING"], label=label, config=_config(budget), env=env
            ) as server,
            PurgatoryClient(server.address, timeout=60) as client,
        ):
            client.try_complete_else_watch(["warm"], 60_000)
            client.check_and_complete("warm")
            baseline = server.rss_bytes()
            run = Run(client)
            pattern(run, a)
            grown = (server.peak_rss_bytes() - baseline) / MIB
        served = f"{run.probes_ok}/{run.probes}"
        rows.append([name, label, round(grown, 1), run.accepted, run.refused, served])
    return rows


def fanout(root: Path, label: str, env: dict[str, str], a: argparse.Namespace) -> list[object]:
    outcomes = a.fanout_outcomes
    with (
        ServerProcess(
            root, ["--log-level", "WARNING"], label=label, config=_config(None), env=env
        ) as server,
        PurgatoryClient(server.address, timeout=60) as client,
    ):
        counts = [0] * a.fanout
        ready = threading.Barrier(a.fanout + 1)

        def read(i: int) -> None:
            stream = client.subscribe(after_sequence=0)  # misses nothing, however late
            ready.wait()
            for _ in stream:
                counts[i] += 1
                if counts[i] == outcomes:
                    stream.close()
                    return

        threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(a.fanout)]
        for t in threads:
            t.start()
        ready.wait()
        time.sleep(0.5)  # the streams' calls under way
        cpu, started = server.cpu_seconds(), time.perf_counter()
        payload = os.urandom(32 * 1024)
        for _ in range(outcomes // 50):
            specs = [OperationSpec(("k",), 600_000, payload=payload) for _ in range(50)]
            client.batch_try_complete_else_watch(specs)
            client.check_and_complete("k")
        for t in threads:
            t.join(timeout=300)
        wall = time.perf_counter() - started
        used = server.cpu_seconds() - cpu
    return [label, a.fanout, outcomes, round(used, 2), round(wall, 2), min(counts)]


def sizes() -> None:
    from purgatory_server._engine.time import MockTime
    from purgatory_server._service.config.server_config import Limits, PurgatorySettings
    from purgatory_server._service.core.named_purgatory import NamedPurgatory
    from purgatory_server._service.model.conditions import ConditionKind, ConditionSpec
    from purgatory_server._service.model.definitions import OperationDefinition, OperationRequest
    from purgatory_server._service.model.sizes import operation_bytes

    # (label, operations, keys each, key length, payload, condition, operations per key):
    # a key watched by two operations costs most per watch (its Watchers and dict, shared
    # by two), one alone the least (the operation is the key's entry).
    shapes = [
        ("1 key, ANY_KEY", 5000, 1, 8, 0, ConditionSpec(), 1),
        ("1 key, min_signals", 5000, 1, 8, 0, ConditionSpec(ConditionKind.MIN_SIGNALS, count=3), 1),
        ("1 key, 1 KiB payload", 5000, 1, 8, 1024, ConditionSpec(), 1),
        ("16 keys of 64 chars", 2000, 16, 64, 0, ConditionSpec(), 1),
        ("16 keys of 64 chars, 2 operations per key", 2000, 16, 64, 0, ConditionSpec(), 2),
        ("1,024 keys of 256 chars", 100, 1024, 256, 0, ConditionSpec(), 1),
    ]
    rows = []
    for label, n, nkeys, keylen, payload, cond, share in shapes:
        loop = asyncio.new_event_loop()
        settings = PurgatorySettings(name="p", max_pending=10**7)
        limits = Limits(memory_budget_bytes=1 << 36)
        p = NamedPurgatory(settings, limits, loop, time=MockTime(), reaper_enabled=False)
        reqs = []
        for i in range(n):
            keys = tuple(f"{i // share:06d}-{k:04d}-".ljust(keylen, "k") for k in range(nkeys))
            body = os.urandom(payload) if payload else b""
            reqs.append(
                OperationRequest(f"op-{i:08d}", OperationDefinition(keys, 600_000, cond, body))
            )
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(0, n, 500):
            p.register(reqs[i : i + 500], [""] * len(reqs[i : i + 500]))
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        given = sum(sys.getsizeof(k) + 8 for r in reqs for k in r.definition.keys)
        given += sum(
            sys.getsizeof(r.definition.payload) + sys.getsizeof(r.operation_id) for r in reqs
        )
        held = (traced + given) / n
        charged = sum(operation_bytes(r.operation_id, r.definition) for r in reqs) / n
        rows.append([label, round(held), round(charged), round(charged / held, 2)])
        p.shutdown_engine()
        loop.close()
    print(markdown_table(["operation", "held B/op", "charged B/op", "charged / held"], rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare-src", help="another source tree, run the same way")
    parser.add_argument("--budget-mib", type=int, default=64)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--key-ops", type=int, default=400)
    parser.add_argument("--purgatories", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sizes", action="store_true", help="also the charges per shape")
    parser.add_argument("--fanout", type=int, default=0, help="also N subscribers' fan-out")
    parser.add_argument("--fanout-outcomes", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    a = parser.parse_args(argv)
    if a.quick:
        a.ops, a.key_ops, a.purgatories, a.rounds = 200, 20, 3, 1
    if a.sizes:
        sizes()
    with tempfile.TemporaryDirectory(prefix="memory-budget-") as tmp:
        root = Path(tmp)
        rows = []
        if a.compare_src:
            env = {"PYTHONPATH": tree_pythonpath(a.compare_src)}
            rows += measure(root, "compare-src", env, None, a)
        rows += measure(root, f"this tree, {a.budget_mib} MiB budget", {}, a.budget_mib, a)
    rows.sort(key=lambda r: r[0])
    headers = [
        "pattern",
        "server",
        "peak RSS over baseline MiB",
        "accepted",
        "refused",
        "probe served",
    ]
    print(markdown_table(headers, rows))
    if a.fanout:
        with tempfile.TemporaryDirectory(prefix="memory-budget-") as tmp:
            out = []
            if a.compare_src:
                env = {"PYTHONPATH": tree_pythonpath(a.compare_src)}
                out.append(fanout(Path(tmp), "compare-src", env, a))
            out.append(fanout(Path(tmp), "this tree", {}, a))
        head = ["server", "streams", "outcomes", "server CPU s", "wall s", "fewest received"]
        print(markdown_table(head, out))


if __name__ == "__main__":
    main()
