"""Durable purgatories on the Session stream: an acknowledgement only after the journal
write; and the batching dispatcher across a server restart (SIGKILL in the middle):
nothing acknowledged is lost, no completed id is registered or completed twice."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from purgatory_client import (
    AsyncPurgatoryClient,
    DispatcherConfig,
    OperationSpec,
    OperationState,
    OperationStatus,
    PurgatoryClient,
)
from purgatory_server._service import create_server

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME, durable_config


class GatedWal:
    """The purgatory's journal, holding every write until ``gate`` is set (in order)."""

    def __init__(self, wal: Any) -> None:
        self._wal = wal
        self.gate = threading.Event()
        self._pool = ThreadPoolExecutor(1)

    def submit(self, records: Any) -> Future[int]:
        def later() -> int:
            assert self.gate.wait(10)
            return int(self._wal.submit(records).result(10))

        return self._pool.submit(later)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wal, name)


async def test_acknowledgements_and_outcomes_wait_for_the_journal(tmp_path: Path) -> None:
    config = durable_config(tmp_path)
    server, port = await create_server("127.0.0.1:0", config)
    try:
        journal = server.registry.get(NAME)._journal
        gated = GatedWal(journal._wal)
        journal._wal = gated
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME) as client:
            session = client.session()
            spec = OperationSpec(("k",), 60_000, operation_id="durable-1")
            future = await session.submit(watches=[spec], signals=["k"])
            done, _ = await asyncio.wait({future}, timeout=0.3)
            assert not done, "acknowledged before the journal wrote"
            gated.gate.set()
            ack = await asyncio.wait_for(future, 10)
            assert ack.error is None and ack.operations[0].created
            event = await asyncio.wait_for(session.outcomes().__anext__(), 10)
            assert (event.operation_id, event.state) == ("durable-1", OperationState.COMPLETED)
            await session.close()
    finally:
        await server.stop(0.5)
    # What was acknowledged is in the journal: a new server knows the outcome.
    server, port = await create_server("127.0.0.1:0", durable_config(tmp_path))
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME) as client:
            status = await client.get_operation("durable-1")
            assert status.state is OperationState.COMPLETED
    finally:
        await server.stop(0.5)


def test_dispatcher_survives_a_server_restart(tmp_path: Path) -> None:
    # The restart binds the port the first start reported: the dispatcher reconnects to
    # the same address, as to a restarted production server.
    server = DurableServer(tmp_path / "data", "always", tmp_path / "server.log")
    n = 400
    config = DispatcherConfig(
        max_batch_size=20, max_batching_delay_ms=1, network_failure_retry_ms=50, max_in_flight=2
    )
    try:
        server.wait_port()
        with PurgatoryClient(server.address, timeout=5, purgatory=NAME) as client:
            dispatcher = client.dispatcher(config)
            watches: dict[str, Future[OperationStatus]] = {}
            signals: list[Future[int]] = []
            acked_before_kill: set[str] = set()
            for i in range(n):
                op_id = f"w{i}"
                watches[op_id] = dispatcher.watch(
                    OperationSpec((f"k{i}",), 120_000, operation_id=op_id)
                )
                if i % 2 == 0:
                    signals.append(dispatcher.signal(f"k{i}"))
                if i == n // 2:
                    # Kill the server in the middle, with work queued and in flight.
                    acked_before_kill = {
                        k for k, f in watches.items() if f.done() and not f.exception()
                    }
                    server.kill()
                    server.start().wait_port()
                time.sleep(0.001)
            assert dispatcher.flush(60), "dispatcher did not drain after the restart"
            counters = dispatcher.counters
            dispatcher.shutdown()
            statuses = {k: f.result(0) for k, f in watches.items()}
            assert all(f.result(0) in (0, 1) for f in signals)
            assert counters.retried > 0 and counters.failed == 0
            assert acked_before_kill, "nothing was acknowledged before the kill"
            # Retried batches may overtake each other (Eureka keeps no order across
            # retries): a signal can land before its watch. Signal every even key again;
            # for a completed watch it is a no-op.
            client.batch_check_and_complete([f"k{i}" for i in range(0, n, 2)])
            # Nothing acknowledged is lost: the restarted server knows every operation.
            final = {op_id: client.get_operation(op_id) for op_id in watches}
            assert set(final) == set(statuses)
            completed = {k for k, s in final.items() if s.state is OperationState.COMPLETED}
            watching = {k for k, s in final.items() if s.state is OperationState.WATCHING}
            assert completed | watching == set(watches)
            # Every signalled key's watch completed, exactly once: one outcome each, and
            # the odd ones, never signalled, still watch (registered once, by id).
            evens = {f"w{i}" for i in range(0, n, 2)}
            assert evens == completed
            info = client.get_purgatory(NAME)
            assert info.pending == len(watching)
            assert info.last_sequence == len(completed)
    finally:
        server.stop()
