"""Service benchmark: long-poll watch -> signal -> outcome pairs over real sockets.

Side by side in one run, each server in its own process (so the load generator never
shares a GIL with it), the load generator in this process:

- **bare grpc.aio** (``bench.service_bare``): the same messages, RPCs that only park and
  resolve an asyncio Future — the transport's ceiling;
- **purgatory**, unbatched: ``TryCompleteElseWatch(wait=true)`` + ``CheckAndComplete``;
- **purgatory**, batch form: ``BatchTryCompleteElseWatch(wait=true)`` of B operations +
  ``BatchCheckAndComplete`` of their B keys;
- the bare server's batch form, for reference;
- the **stream form** (``bench._service_stream``): ``--streams`` Session streams, each
  with B watches then B signals in flight per frame pair, on the purgatory and on the
  bare server given the same streaming shape;
- **Redis** (Debian's ``redis-server`` on a loopback port, redis-py asyncio with the
  hiredis parser): ``BLPOP`` + ``LPUSH`` at the unbatched concurrency, and twice at the
  batch form's concurrency: one BLPOP connection per waiting operation with the B
  LPUSHes pipelined, and Redis's own batch form, B BLPOPs pipelined on one connection
  per worker (see :func:`redis_batched`). Batch forms are compared with the faster;
- a **burst** of 10,000 long-polls sent at once to a fresh purgatory server: the server's
  RSS growth per waiting long-poll, and how many calls were CANCELLED (must be 0).

A pair's latency is measured from sending the signal to receiving the long-poll's answer.
Unbatched and Redis workers keep one pair in flight each; batch workers keep B.

    python -m bench.service_bench [--duration 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig

from bench._common import write_json
from bench._service_report import (
    BAT,
    REDIS_BATCH,
    REDIS_PIPE,
    REDIS_UNB,
    STREAM,
    UNB,
    Run,
    drive,
    report,
)
from bench._service_stream import grpc_stream

OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@contextlib.contextmanager
def process(cmd: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def purgatory_cmd(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "purgatory_server",
        "--listen",
        f"127.0.0.1:{port}",
        "--log-level",
        "WARNING",
    ]


def bare_cmd(port: int, max_concurrent_rpcs: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "bench.service_bare", "--port", str(port)]
    if max_concurrent_rpcs:
        cmd += ["--max-concurrent-rpcs", str(max_concurrent_rpcs)]
    return cmd


async def wait_ready(target: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)


def _watch(key: str, wait: bool = True) -> Any:
    return pb.TryCompleteElseWatchRequest(
        purgatory="default", keys=[key], timeout_ms=600_000, wait=wait
    )


async def grpc_unbatched(name: str, target: str, concurrency: int, a: argparse.Namespace) -> Run:
    channels = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(a.channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        stub = stubs[w % len(stubs)]
        while time.perf_counter() < end:
            serial[0] += 1
            key = f"{w}-{serial[0]}"
            waiting = asyncio.ensure_future(stub.TryCompleteElseWatch(_watch(key)))
            await asyncio.sleep(0)  # the long-poll goes out first
            t0 = time.perf_counter()
            signal_req = pb.CheckAndCompleteRequest(purgatory="default", key=key)
            while (await stub.CheckAndComplete(signal_req)).completed == 0:
                run.retries += 1  # the signal overtook the watch: send it again
            await waiting
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += 1

    try:
        return await drive(Run(name, concurrency), concurrency, worker, a.duration, a.warmup)
    finally:
        for c in channels:
            await c.close()


async def grpc_batched(name: str, target: str, a: argparse.Namespace) -> Run:
    channels = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(a.channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in channels]
    serial = [0]
    size = a.batch_size

    async def worker(w: int, run: Run, end: float) -> None:
        stub = stubs[w % len(stubs)]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{w}-{serial[0]}-{i}" for i in range(size)]
            ops = [pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in keys]
            waiting = asyncio.ensure_future(
                stub.BatchTryCompleteElseWatch(
                    pb.BatchTryCompleteElseWatchRequest(
                        purgatory="default", operations=ops, wait=True
                    )
                )
            )
            await asyncio.sleep(0)
            t0 = time.perf_counter()
            todo = keys
            while todo:
                resp = await stub.BatchCheckAndComplete(
                    pb.BatchCheckAndCompleteRequest(
                        purgatory="default", signals=[pb.KeySignal(key=k) for k in todo]
                    )
                )
                todo = [k for k, n in zip(todo, resp.completed_per_signal, strict=True) if not n]
                run.retries += len(todo)
            await waiting
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += size

    concurrency = a.batch_workers * size
    try:
        return await drive(Run(name, concurrency), a.batch_workers, worker, a.duration, a.warmup)
    finally:
        for c in channels:
            await c.close()


async def redis_pairs(
    name: str, port: int, workers: int, per_worker: int, a: argparse.Namespace
) -> Run:
    import redis.asyncio as aioredis

    waiters = [
        [aioredis.Redis(port=port, single_connection_client=True) for _ in range(per_worker)]
        for _ in range(workers)
    ]
    signallers = [aioredis.Redis(port=port, single_connection_client=True) for _ in range(workers)]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        conns, signaller = waiters[w], signallers[w]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{w}-{serial[0]}-{i}" for i in range(per_worker)]
            waiting = [
                asyncio.ensure_future(c.blpop([k], timeout=0))
                for c, k in zip(conns, keys, strict=True)
            ]
            await asyncio.sleep(0)
            t0 = time.perf_counter()
            if per_worker == 1:
                await signaller.lpush(keys[0], b"1")
            else:
                pipe = signaller.pipeline(transaction=False)
                for k in keys:
                    pipe.lpush(k, b"1")
                await pipe.execute()
            await asyncio.gather(*waiting)
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += per_worker

    try:
        return await drive(Run(name, workers * per_worker), workers, worker, a.duration, a.warmup)
    finally:
        for c in [*signallers, *(c for ws in waiters for c in ws)]:
            await c.aclose()


async def redis_batched(name: str, port: int, a: argparse.Namespace) -> Run:
    """Redis's own batch form: each worker pipelines B BLPOPs on ONE connection, and the
    B LPUSHes on another.

    Redis serves a connection's commands in order, so the first BLPOP blocks until its
    key is pushed and each later one finds its value already there: every wait is
    answered, and the pipeline's reply arrives once all B are, which is exactly what the
    batch long-poll promises. B waits are in flight per worker, as in the batch form.
    This is the cheapest way we found to have Redis do this work (far cheaper than one
    connection per waiter), so it is the baseline the batch form is judged against.
    """
    import redis.asyncio as aioredis

    size = a.batch_size
    waiters = [
        aioredis.Redis(port=port, single_connection_client=True) for _ in range(a.batch_workers)
    ]
    signallers = [
        aioredis.Redis(port=port, single_connection_client=True) for _ in range(a.batch_workers)
    ]
    serial = [0]

    async def worker(w: int, run: Run, end: float) -> None:
        waiter, signaller = waiters[w], signallers[w]
        while time.perf_counter() < end:
            serial[0] += 1
            keys = [f"{w}-{serial[0]}-{i}" for i in range(size)]
            waits = waiter.pipeline(transaction=False)
            for k in keys:
                waits.blpop([k], timeout=0)
            waiting = asyncio.ensure_future(waits.execute())
            await asyncio.sleep(0)
            t0 = time.perf_counter()
            pushes = signaller.pipeline(transaction=False)
            for k in keys:
                pushes.lpush(k, b"1")
            await pushes.execute()
            answers = await waiting
            if len(answers) != size or any(x is None for x in answers):
                raise RuntimeError("a pipelined BLPOP came back without its value")
            run.latencies.append(time.perf_counter() - t0)
            run.pairs += size

    try:
        return await drive(
            Run(name, a.batch_workers * size), a.batch_workers, worker, a.duration, a.warmup
        )
    finally:
        for c in [*waiters, *signallers]:
            await c.aclose()


async def burst(target: str, pid: int, n: int, channels: int) -> dict[str, Any]:
    """n long-polls at once on fresh server: RSS growth per waiter, CANCELLED count."""
    chans = [grpc.aio.insecure_channel(target, OWN_CONNECTION) for _ in range(channels)]
    stubs = [pb_grpc.PurgatoryServiceStub(c) for c in chans]
    try:
        for stub in stubs:  # connections up before the baseline is taken
            await stub.ListPurgatories(pb.ListPurgatoriesRequest())
        await asyncio.sleep(0.5)
        before = rss_kib(pid)
        t0 = time.perf_counter()
        calls = [
            asyncio.ensure_future(
                stubs[i % channels].TryCompleteElseWatch(_watch(f"b{i}"), timeout=300)
            )
            for i in range(n)
        ]
        info_req = pb.GetPurgatoryRequest(name="default")
        while (await stubs[0].GetPurgatory(info_req)).purgatory.pending < n:
            if sum(c.done() for c in calls) > 0:
                break  # some call already ended: count it below instead of waiting forever
            await asyncio.sleep(0.05)
        registered_s = time.perf_counter() - t0
        await asyncio.sleep(0.5)
        after = rss_kib(pid)
        for start in range(0, n, 1000):
            keys = [f"b{i}" for i in range(start, min(n, start + 1000))]
            await stubs[0].BatchCheckAndComplete(
                pb.BatchCheckAndCompleteRequest(
                    purgatory="default", signals=[pb.KeySignal(key=k) for k in keys]
                )
            )
        results = await asyncio.gather(*calls, return_exceptions=True)
        answered_s = time.perf_counter() - t0
    finally:
        for c in chans:
            await c.close()
    codes: dict[str, int] = {}
    for r in results:
        code = r.code().name if isinstance(r, grpc.aio.AioRpcError) else "OK"
        codes[code] = codes.get(code, 0) + 1
    return {
        "n": n,
        "rss_before_kib": before,
        "rss_waiting_kib": after,
        "bytes_per_waiter": (after - before) * 1024 / n,
        "registered_s": registered_s,
        "answered_s": answered_s,
        "codes": codes,
    }


def redis_cmd(redis_server: str, port: int) -> list[str]:
    return [
        redis_server,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--maxclients",
        "10000",
    ]


async def wait_redis(port: int) -> None:
    import redis.asyncio as aioredis

    probe = aioredis.Redis(port=port)
    try:
        for _ in range(100):
            with contextlib.suppress(Exception):
                if await probe.ping():
                    return
            await asyncio.sleep(0.05)
        raise RuntimeError("redis-server did not answer")
    finally:
        await probe.aclose()


Scenario = tuple[str, Callable[[], Awaitable[Run]]]


def merge(total: Run | None, part: Run) -> Run:
    if total is None:
        return part
    total.pairs += part.pairs
    total.retries += part.retries
    total.seconds += part.seconds
    total.latencies.extend(part.latencies)
    return total


async def main_async(a: argparse.Namespace) -> dict[str, Any]:
    """Every scenario once per round, rounds interleaved, all servers up throughout.

    Why rounds: the machine is shared, and its load drifts over a minute. Running every
    system for a short slice in turn, several times, exposes each to the same drift;
    ratios are then taken per round (median reported) as well as over the totals.
    """
    bursts: dict[str, Any] = {}
    p_port, b_port = free_port(), free_port()
    c = a.concurrency
    with contextlib.ExitStack() as stack:
        bare = stack.enter_context(process(bare_cmd(b_port, a.bare_max_concurrent_rpcs)))
        stack.enter_context(process(purgatory_cmd(p_port)))
        bare_target, purg_target = f"127.0.0.1:{b_port}", f"127.0.0.1:{p_port}"
        await wait_ready(bare_target)
        await wait_ready(purg_target)
        scenarios: list[Scenario] = [
            ("bare grpc.aio, unbatched", lambda: grpc_unbatched(UNB[0], bare_target, c, a)),
            ("purgatory, unbatched", lambda: grpc_unbatched(UNB[1], purg_target, c, a)),
            ("bare grpc.aio, batch form", lambda: grpc_batched(BAT[0], bare_target, a)),
            ("purgatory, batch form", lambda: grpc_batched(BAT[1], purg_target, a)),
            (STREAM[0], lambda: grpc_stream(STREAM[0], bare_target, a)),
            (STREAM[1], lambda: grpc_stream(STREAM[1], purg_target, a)),
        ]
        if a.compare_src:
            # The same scenarios against a server run from another source tree (e.g. the
            # last commit, `git archive HEAD | tar -x -C DIR`): before/after in one run.
            src = os.path.abspath(a.compare_src)
            env = {**os.environ, "PYTHONPATH": f"{src}/server{os.pathsep}{src}/proto"}
            o_port = free_port()
            stack.enter_context(process(purgatory_cmd(o_port), env))
            o_target = f"127.0.0.1:{o_port}"
            await wait_ready(o_target)
            label = f"purgatory @{a.compare_label}"
            scenarios += [
                (f"{label}, unbatched", lambda: grpc_unbatched(f"{label}, u", o_target, c, a)),
                (f"{label}, batch form", lambda: grpc_batched(f"{label}, b", o_target, a)),
                (f"{label}, stream form", lambda: grpc_stream(f"{label}, s", o_target, a)),
            ]
        redis_server = shutil.which("redis-server")
        if redis_server and not a.skip_redis:
            r_port = free_port()
            stack.enter_context(process(redis_cmd(redis_server, r_port)))
            await wait_redis(r_port)
            bw, bs = a.batch_workers, a.batch_size
            scenarios += [
                (REDIS_UNB, lambda: redis_pairs(REDIS_UNB, r_port, c, 1, a)),
                (REDIS_PIPE, lambda: redis_pairs(REDIS_PIPE, r_port, bw, bs, a)),
                (REDIS_BATCH, lambda: redis_batched(REDIS_BATCH, r_port, a)),
            ]
        totals: dict[str, Run] = {}
        per_round: dict[str, list[float]] = {name: [] for name, _ in scenarios}
        for r in range(a.rounds):
            for name, run_one in scenarios:
                part = await run_one()
                part.name = name
                per_round[name].append(part.rate)
                totals[name] = merge(totals.get(name), part)
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
        bursts["bare grpc.aio"] = await burst(bare_target, bare.pid, a.burst, a.channels)
    # The purgatory burst last, on a fresh server (clean RSS baseline).
    p2 = free_port()
    with process(purgatory_cmd(p2)) as fresh:
        await wait_ready(f"127.0.0.1:{p2}")
        bursts["purgatory"] = await burst(f"127.0.0.1:{p2}", fresh.pid, a.burst, a.channels)
    return {
        "runs": [totals[name] for name, _ in scenarios],
        "per_round": per_round,
        "bursts": bursts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", type=float, default=2.0, help="seconds per scenario per round"
    )
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds before each")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--bare-max-concurrent-rpcs",
        type=int,
        default=ServerConfig().max_concurrent_rpcs,
        help="the bare server's grpc.aio RPC limiter; defaults to the purgatory server's "
        "max_concurrent_rpcs, so both run the same transport; 0 turns it off",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="unbatched pairs in flight")
    parser.add_argument("--channels", type=int, default=2, help="client connections")
    parser.add_argument("--batch-workers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--streams", type=int, default=4, help="Session streams (stream form)")
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument(
        "--compare-src", help="also bench a purgatory server run from this source tree"
    )
    parser.add_argument("--compare-label", default="baseline", help="its name in the table")
    parser.add_argument("--json", help="write raw numbers here (default bench/results/)")
    a = parser.parse_args()
    print(f"service bench: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    payload = report(asyncio.run(main_async(a)), a)
    print(f"\nraw numbers: {write_json('service_bench', payload, a.json)}")


if __name__ == "__main__":
    main()
