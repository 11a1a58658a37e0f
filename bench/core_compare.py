"""Service core, this tree vs another source tree: CPU per watch -> signal pair, in process.

The servicer is called directly (no sockets, no gRPC transport), so what is measured is
the service core itself: validation, registration, the engine, the outcome path (the
feed), responses. Each measurement runs in a fresh child process whose ``PYTHONPATH``
selects the tree; the trees alternate within every round (order flipped each round) so
both see the same machine load. The figure is the event loop thread's CPU time
(``thread_time``: where the whole service core runs; the journal writer thread, whose
work is the same records in both trees, is left out) per pair, the best of ``--repeats``
batches inside each child; the report gives the median per-round ratio and each round's.

    python -m bench.core_compare --compare-src /tmp/base [--rounds 6] [--pairs 4000]

Forms: unbatched (``TryCompleteElseWatch(wait)`` + ``CheckAndComplete``), batch
(``BatchTryCompleteElseWatch`` of 100 + ``BatchCheckAndComplete``) and session (one
``Session`` stream, a frame of 100 watches then a frame of their 100 signals, frames
decoded from bytes and every response encoded, as the transport would), on an in-memory
and on a durable purgatory (journal in a temp directory, fsync ``never``: CPU, not the disk).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from operator import itemgetter
from pathlib import Path

from bench._common import tree_pythonpath, write_json
from bench._rounds import Rounds

CHILD = r"""
import asyncio, json, sys, tempfile, time
from dataclasses import replace
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.config.server_config import Limits, PurgatorySettings, ServerConfig
from purgatory_server._service.durable.local_store import durable_factory
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.api.servicer import PurgatoryServicer

PAIRS, REPEATS = int(sys.argv[1]), int(sys.argv[2])


class Ctx:
    def code(self): return None
    def invocation_metadata(self): return ()


async def pairs(servicer, name, n, batch, tag):
    ctx, rounds = Ctx(), []
    for r in range(n // batch):
        keys = [f"{tag}-{r}-{i}" for i in range(batch)]
        if batch == 1:
            watch = pb.TryCompleteElseWatchRequest(
                purgatory=name, keys=keys, timeout_ms=600_000, wait=True)
            signal = pb.CheckAndCompleteRequest(purgatory=name, key=keys[0])
            rounds.append((servicer.TryCompleteElseWatch, watch, servicer.CheckAndComplete, signal))
        else:
            specs = [pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys]
            watch = pb.BatchTryCompleteElseWatchRequest(purgatory=name, wait=True, operations=specs)
            signals = [pb.KeySignal(key=k) for k in keys]
            signal = pb.BatchCheckAndCompleteRequest(purgatory=name, signals=signals)
            rounds.append(
                (servicer.BatchTryCompleteElseWatch, watch, servicer.BatchCheckAndComplete, signal))
    started = time.thread_time()
    for register, watch, complete, signal in rounds:
        waiting = asyncio.ensure_future(register(watch, ctx))
        await asyncio.sleep(0)
        await complete(signal, ctx)
        await waiting
    return (time.thread_time() - started) / n


async def session_pairs(registry, name, n, batch, tag):
    # The stream form: frames of `batch` watches then their signals on one Session,
    # frames decoded from bytes and responses encoded as the transport would.
    from purgatory_server._service.api.session_rpc import SessionStream
    loop = asyncio.get_running_loop()
    inbox, state = asyncio.Queue(), {"outcomes": 0, "acked": 0, "done": None}
    rounds = []
    for r in range(n // batch):
        keys = [f"{tag}-{r}-{i}" for i in range(batch)]
        watch = pb.SessionRequest(request_id=2 * r + 1, purgatory=name, watches=[
            pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys])
        signal = pb.SessionRequest(request_id=2 * r + 2, purgatory=name,
                                   signals=[pb.KeySignal(key=k) for k in keys])
        rounds.append((watch.SerializeToString(), signal.SerializeToString(), 2 * r + 2))

    async def frames():
        while True:
            data = await inbox.get()
            if data is None:
                return
            yield pb.SessionRequest.FromString(data)

    async def send(message):
        message.SerializeToString()
        state["outcomes"] += len(message.outcomes)
        if message.HasField("ack"):
            state["acked"] = message.ack.request_id
        done = state["done"]
        if state["outcomes"] >= batch and state["acked"] == done[1] and not done[0].done():
            done[0].set_result(None)

    stream = asyncio.ensure_future(SessionStream(registry, loop).run(frames(), send))
    started = time.thread_time()
    for watch, signal, signal_id in rounds:
        state["outcomes"] = 0
        state["done"] = (loop.create_future(), signal_id)
        inbox.put_nowait(watch)
        inbox.put_nowait(signal)
        await state["done"][0]
    elapsed = time.thread_time() - started
    inbox.put_nowait(None)
    await stream
    return elapsed / n


async def main():
    loop = asyncio.get_running_loop()
    with tempfile.TemporaryDirectory() as data:
        config = ServerConfig(data_dir=data, fsync="never")
        registry = PurgatoryRegistry(Limits(), PurgatorySettings(), loop, reaper_enabled=False,
                                     journal_factory=durable_factory(config, loop))
        registry.create(registry.settings_for("mem", None))
        registry.create(replace(registry.settings_for("dur", None), durable=True))
        servicer = PurgatoryServicer(registry, loop)
        out = {}
        for name in ("mem", "dur"):
            for batch in (1, 100):
                runs = [await pairs(servicer, name, PAIRS, batch, f"{name}{batch}-{i}")
                        for i in range(REPEATS)]
                kind = "in memory" if name == "mem" else "durable"
                form = "unbatched" if batch == 1 else "batch of 100"
                out[f"{kind}, {form}"] = min(runs)
            runs = [await session_pairs(registry, name, PAIRS, 100, f"{name}s-{i}")
                    for i in range(REPEATS)]
            out[f"{'in memory' if name == 'mem' else 'durable'}, session of 100"] = min(runs)
        await registry.shutdown()
    print(json.dumps(out))

asyncio.run(main())
"""


def run_child(src: Path, pairs: int, repeats: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree_pythonpath(str(src))}
    with tempfile.TemporaryDirectory() as cwd:  # no stray imports from the caller's cwd
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(pairs), str(repeats)],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode:
        raise RuntimeError(f"child for {src} failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare-src", required=True, help="the other source tree")
    parser.add_argument("--compare-label", default="baseline")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--pairs", type=int, default=4000, help="pairs per batch of pairs")
    parser.add_argument("--repeats", type=int, default=3, help="batches of pairs per child")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    other = Path(a.compare_src).resolve()
    print(f"core compare: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    trees = {"this tree": here, a.compare_label: other}
    rounds: Rounds[dict[str, float]] = Rounds(list(trees), a.rounds)
    rounds.run(lambda label: run_child(trees[label], a.pairs, a.repeats))
    forms = list(rounds.results[0]["this tree"])
    print(
        f"\n| form | this tree µs/pair | {a.compare_label} µs/pair | ratio (median) | per round |"
    )
    print("| --- | ---: | ---: | ---: | --- |")
    summary = {}
    for form in forms:
        new = rounds.values("this tree", itemgetter(form))
        old = rounds.values(a.compare_label, itemgetter(form))
        # > 1: this tree is faster
        ratios = rounds.ratios(a.compare_label, "this tree", itemgetter(form))
        med = statistics.median(ratios)
        summary[form] = {
            "this": statistics.median(new),
            "other": statistics.median(old),
            "ratio": med,
        }
        each = ", ".join(f"{x:.2f}" for x in ratios)
        print(
            f"| {form} | {statistics.median(new) * 1e6:.1f} | {statistics.median(old) * 1e6:.1f} "
            f"| {med:.2f}x | {each} |"
        )
    print(f"\nratio = {a.compare_label} CPU / this tree's CPU per pair (> 1: this tree is cheaper)")
    print(rounds.load_report())
    payload = {"rounds": rounds.results, "summary": summary, "loads_1min": rounds.loads}
    print(f"raw numbers: {write_json('core_compare', payload, a.json)}")


if __name__ == "__main__":
    main()
