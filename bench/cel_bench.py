"""Conditions with expressions (docs/conditions.md): what they cost, three measurements.

1. ``library``: the two CEL libraries on PyPI side by side, in this process: compile and
   evaluate one filter (the bench expression, on the same context), and what each offers
   that the service needs (error positions, a cost limit, no side effects).
2. ``service``: register -> signal pairs over the batch form against one server process,
   the same workload with and without a simple filter in interleaved rounds of the same
   run: pairs/s and the server's CPU per pair (``/proc``), and their ratios. Both
   workloads send the same signal attributes; only the operations' condition differs.
3. ``match``: a NamedPurgatory in this process with N operations waiting on one key, each
   matching a different ``invoice_id``: the time per signal that completes one of them,
   for a small and a large N (the ``match`` index makes it independent of N).

Usage: ``python -m bench.cel_bench [--parts library,service,match] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from bench._common import bench_server

# The service part's simple filter (--filter), and the library part's expression.
SIMPLE = "signal.attributes.approved"
FILTER = "signal.attributes.approved && signal.attributes.invoice_id == op.attributes.invoice_id"
CONTEXT = {
    "signal": {
        "key": "k",
        "amount": 0,
        "value": None,
        "source": "",
        "attributes": {"approved": True, "invoice_id": 42, "customer": "acme"},
    },
    "op": {"id": "op-1", "keys": ["k"], "attributes": {"invoice_id": 42}},
}


def _per_call_us(fn: Any, n: int) -> float:
    n = max(1, int(n * _SCALE[0]))
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6


# The share of each library measurement's repetitions to run (--quick: a twentieth).
_SCALE = [1.0]


def _bound_eval(compiled: Any, bound: Any) -> object:
    bound.add_variable("signal", CONTEXT["signal"])
    try:
        return compiled.execute(bound)
    finally:
        bound.add_variable("signal", None)


def library(scale: float) -> None:
    _SCALE[0] = scale
    import cel
    import celpy

    env = celpy.Environment()
    rust = cel.compile(FILTER)
    py = env.program(env.compile(FILTER))
    py_context = {k: celpy.json_to_cel(v) for k, v in CONTEXT.items()}
    bound = cel.Context()
    for name, value in CONTEXT.items():
        bound.add_variable(name, value)
    texts = iter(f"signal.attributes.invoice_id == {i}" for i in range(10**9))
    rows = [
        (
            "compile (distinct texts)",
            _per_call_us(lambda: cel.compile(next(texts)), 2000),
            _per_call_us(lambda: env.program(env.compile(next(texts))), 200),
        ),
        (
            "evaluate (context given as Python dicts)",
            _per_call_us(lambda: rust.execute(CONTEXT), 20000),
            _per_call_us(
                lambda: py.evaluate({k: celpy.json_to_cel(v) for k, v in CONTEXT.items()}), 500
            ),
        ),
        (
            "evaluate (context converted once)",
            _per_call_us(lambda: rust.execute(bound), 20000),
            _per_call_us(lambda: py.evaluate(py_context), 500),
        ),
        (
            "evaluate (the service's way: op bound once, signal added each time)",
            _per_call_us(lambda: _bound_eval(rust, bound), 20000),
            float("nan"),
        ),
    ]
    print("| step | common-expression-language µs | cel-python µs | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name, a, b in rows:
        print(f"| {name} | {a:.1f} | {b:.1f} | {b / a:.1f}x |")
    for name, probe in (("syntax error", "signal.attributes.x &&"),):
        try:
            cel.compile(probe)
        except ValueError as exc:
            print(f"common-expression-language {name}: {str(exc).splitlines()[0][:120]}")
        try:
            env.compile(probe)
        except celpy.CELParseError as exc:
            print(f"cel-python {name}: line {exc.line} column {exc.column}")


def _specs(batch: int, prefix: str, filtered: bool, text: str = SIMPLE) -> list[Any]:
    specs = []
    for j in range(batch):
        condition = None
        if filtered:
            condition = pb.Condition(any_key=pb.AnyKeyCondition(), filter=text)
            if "op." in text:  # the operation's attributes only where the filter reads them
                condition.attributes.update({"invoice_id": j})
        specs.append(
            pb.OperationSpec(keys=[f"{prefix}{j}"], timeout_ms=60_000, condition=condition)
        )
    return specs


def _signals(batch: int, prefix: str) -> list[Any]:
    out = []
    for j in range(batch):
        sig = pb.Signal()
        sig.attributes.update({"approved": True, "invoice_id": j, "customer": "acme"})
        out.append(pb.KeySignal(key=f"{prefix}{j}", signal=sig))
    return out


async def _pairs(
    address: str, filtered: bool, seconds: float, clients: int, batch: int, *, text: str
) -> float:
    channel = grpc.aio.insecure_channel(address)
    stub: Any = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    done = 0
    stop_at = time.perf_counter() + seconds
    tag = "f" if filtered else "p"

    async def worker(w: int) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < stop_at:
            n += 1
            prefix = f"{tag}{w}-{n}-{time.perf_counter_ns()}-"
            await stub.BatchTryCompleteElseWatch(
                pb.BatchTryCompleteElseWatchRequest(
                    purgatory="default", operations=_specs(batch, prefix, filtered, text)
                )
            )
            answer = await stub.BatchCheckAndComplete(
                pb.BatchCheckAndCompleteRequest(
                    purgatory="default", signals=_signals(batch, prefix)
                )
            )
            assert answer.completed == batch, answer.completed
            done += batch

    try:
        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(clients)))
        return done / (time.perf_counter() - started)
    finally:
        await channel.close()


def service(rounds: int, seconds: float, clients: int, batch: int, text: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="cel-bench-"))
    server = bench_server(root, "cel")
    server.start()
    port = server.wait_port()
    address = f"127.0.0.1:{port}"
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        for filtered in (False, True):  # warm-up
            asyncio.run(_pairs(address, filtered, min(1.0, seconds), clients, batch, text=text))
        for r in range(rounds):
            for filtered in (False, True) if r % 2 == 0 else (True, False):
                cpu = server.cpu_seconds()
                rate = asyncio.run(_pairs(address, filtered, seconds, clients, batch, text=text))
                used = server.cpu_seconds() - cpu
                results[filtered].append((rate, used / (rate * seconds) * 1e6))
    finally:
        server.stop()
    print(f"filter: {text}")
    print("| workload | pairs/s (median) | per round | server CPU µs/pair (median) |")
    print("| --- | ---: | --- | ---: |")
    for filtered in (False, True):
        rates = [r for r, _ in results[filtered]]
        cpus = [c for _, c in results[filtered]]
        name = "simple filter" if filtered else "no filter"
        per_round = ", ".join(f"{x:,.0f}" for x in rates)
        print(
            f"| {name} | {statistics.median(rates):,.0f} | {per_round} | "
            f"{statistics.median(cpus):.1f} |"
        )
    ratios_rate = [p[0] / f[0] for p, f in zip(results[False], results[True], strict=True)]
    ratios_cpu = [f[1] / p[1] for p, f in zip(results[False], results[True], strict=True)]
    rounds_text = ", ".join(f"{x:.2f}" for x in ratios_rate)
    print(
        f"throughput cost (no filter / filter, per round): {rounds_text}; "
        f"median {statistics.median(ratios_rate):.2f}x"
    )
    print(
        f"CPU per pair (filter / no filter, per round): "
        f"{', '.join(f'{x:.2f}' for x in ratios_cpu)}; median {statistics.median(ratios_cpu):.2f}x"
    )


def match(sizes: tuple[int, ...], signals: int) -> None:
    from purgatory_server._engine.time import MockTime
    from purgatory_server._service.config.server_config import Limits, PurgatorySettings
    from purgatory_server._service.core.named_purgatory import NamedPurgatory
    from purgatory_server._service.model.attributes import Attributes
    from purgatory_server._service.model.conditions import ConditionSpec, Gate, SignalRecord
    from purgatory_server._service.model.definitions import OperationDefinition, OperationRequest
    from purgatory_server._service.model.errors import ShuttingDown

    async def run(n: int) -> tuple[float, float, float]:
        p = NamedPurgatory(
            PurgatorySettings(name="m", max_pending=n + 1),
            Limits(max_total_pending=n + 1),
            asyncio.get_running_loop(),
            time=MockTime(),
            reaper_enabled=False,
        )
        try:
            requests = []
            for i in range(n):
                gate = Gate(
                    match="invoice_id", attributes=Attributes(str(i).encode(), {"invoice_id": i})
                )
                definition = OperationDefinition(("paid",), 600_000, ConditionSpec(gate=gate), b"")
                requests.append(OperationRequest(f"op-{i}", definition))
            started = time.perf_counter()
            for k in range(0, n, 10_000):
                p.register(requests[k : k + 10_000], [""] * len(requests[k : k + 10_000]))
            register_us = (time.perf_counter() - started) / n * 1e6
            batch = [
                ("paid", SignalRecord(attributes=Attributes(str(i).encode(), {"invoice_id": i})))
                for i in range(0, n, max(1, n // signals))
            ][:signals]
            ops = p.pending_operations()
            started = time.perf_counter()
            for item in batch:
                assert p.signal([item]) == [1]
            signal_us = (time.perf_counter() - started) / len(batch) * 1e6
            # Operations whose progress saw a signal (``_seen``: the slot's serial it read).
            tried = sum(op._seen != 0 for op in ops)
            return register_us, signal_us, tried / len(batch)
        finally:
            p.close(ShuttingDown())
            p.shutdown_engine()

    print(
        "| operations waiting on the key | register µs/op | signal µs (completes one) "
        "| operations tried per signal |"
    )
    print("| ---: | ---: | ---: | ---: |")
    for n in sizes:
        register_us, signal_us, tried = asyncio.run(run(n))
        print(f"| {n:,} | {register_us:.1f} | {signal_us:.1f} | {tried:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="library,service,match")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--match-sizes", default="1000,100000")
    parser.add_argument("--filter", default=SIMPLE, help=f"the service part's filter ({SIMPLE!r})")
    parser.add_argument("--quick", action="store_true", help="a twentieth of the library runs")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if "library" in parts:
        library(0.05 if args.quick else 1.0)
    if "service" in parts:
        service(args.rounds, args.seconds, args.clients, args.batch, args.filter)
    if "match" in parts:
        match(tuple(int(s) for s in args.match_sizes.split(",")), 1000)


if __name__ == "__main__":
    main()
