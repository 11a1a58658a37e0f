"""Purgatories are cheap: a thousand in memory or a couple of hundred durable ones cost
no thread each, an idle server with them uses next to no CPU, creating durable ones does
not stall the event loop, and a deleted one gives back what it held. The full figures
(10,000 and 1,000, a probe's latency, RSS, restart time) are bench.many_purgatories_bench's
(docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

from purgatory_client import AsyncPurgatoryClient, PurgatoryConfig

from tests.service.conftest import ServeFn
from tests.service.helpers import TEST_CONFIG

IN_MEMORY = 1_200
DURABLE = 200


def _config(data_dir: Path, count: int) -> object:
    limits = replace(TEST_CONFIG.limits, max_purgatories=count + 8)
    return replace(TEST_CONFIG, limits=limits, data_dir=str(data_dir))


async def _create(client: AsyncPurgatoryClient, names: list[str], durable: bool) -> None:
    config = PurgatoryConfig(durable=durable)
    for first in range(0, len(names), 50):
        chunk = names[first : first + 50]
        await asyncio.gather(*(client.create_purgatory(n, config) for n in chunk))


async def _pair(client: AsyncPurgatoryClient, purgatory: str, key: str) -> None:
    """A watch completed by a signal, on ``purgatory``."""
    waiting = asyncio.ensure_future(client.wait([key], 30_000, purgatory=purgatory))
    while not waiting.done():
        await client.check_and_complete(key, purgatory=purgatory)
        await asyncio.wait([waiting], timeout=0.01)
    assert (await waiting).state.name == "COMPLETED"


async def test_a_thousand_in_memory_purgatories_cost_no_thread_and_no_idle_cpu(
    serve: ServeFn, tmp_path: Path
) -> None:
    server, port = await serve(config=_config(tmp_path, IN_MEMORY))
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=30) as client:
        await _create(client, ["warm"], False)
        threads = threading.active_count()
        names = [f"m{i}" for i in range(IN_MEMORY)]
        await _create(client, names, False)
        # One reaper and one executor serve them all (each used to start two threads).
        assert threading.active_count() <= threads + 2, threading.active_count() - threads
        reaper = server.registry.reaper
        assert reaper is not None and reaper.attached() >= IN_MEMORY
        # Their timers are driven: an operation in the last one expires, one completes.
        expiring = asyncio.ensure_future(client.wait(["x"], 50, purgatory=names[-1]))
        await _pair(client, names[0], "k")
        assert (await asyncio.wait_for(expiring, 10)).state.name == "EXPIRED"
        # Idle: no reaper polls (each used to wake 5 times a second), so this process
        # (server and client) uses well under 5% of a core.
        await asyncio.sleep(0.2)
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(1.0)
        share = (time.process_time() - cpu) / (time.monotonic() - wall)
        assert share < 0.05, f"idle server used {share:.1%} of a core"
        # Deleting gives back its place in the reaper.
        attached = reaper.attached()
        await client.delete_purgatory(names[1])
        assert reaper.attached() == attached - 1


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_two_hundred_durable_purgatories_share_the_journal_writers(
    serve: ServeFn, tmp_path: Path
) -> None:
    _, port = await serve(config=_config(tmp_path, DURABLE))
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=30) as client:
        await _create(client, ["warm"], True)
        threads, fds = threading.active_count(), _open_fds()
        lags: list[float] = []
        stop = asyncio.Event()

        async def loop_lag() -> None:
            # How late a 10 ms sleep wakes: what a create holding the loop adds to every
            # other request's latency.
            while not stop.is_set():
                began = time.monotonic()
                await asyncio.sleep(0.01)
                lags.append(time.monotonic() - began - 0.01)

        sampler = asyncio.ensure_future(loop_lag())
        names = [f"d{i}" for i in range(DURABLE)]
        await _create(client, names, True)
        stop.set()
        await sampler
        # A few shared writer threads (each journal used to start its own, and each
        # purgatory two more) and two descriptors per journal (its lock, its head).
        # (asyncio's default executor, which opens the journals, may add a few.)
        assert threading.active_count() <= threads + 12, threading.active_count() - threads
        assert _open_fds() <= fds + 2 * DURABLE + 8
        writers = {t.name for t in threading.enumerate() if t.name.startswith("journal-writer")}
        assert len(writers) <= 4, writers
        # Opening a journal (files created and fsynced) runs off the loop: no create holds
        # it for long (a generous bound: a loaded CI machine alone can stall it 0.5 s).
        assert max(lags) < 2.0, f"the loop stalled {max(lags):.3f}s while creating"
        await _pair(client, names[-1], "k")
        await client.delete_purgatory(names[0])
        assert _open_fds() <= fds + 2 * (DURABLE - 1) + 8
