"""10,000 concurrent long-polls, completed by batched signals, with no call dropped.

Each long-poll is its own RPC (the point is that 10,000 *calls* wait at once without a
thread each); four channels with their own connections carry them. Bounded: the waits
must all be in place within 60 s and all answered within 60 s more.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from purgatory_client import AsyncPurgatoryClient, OperationState, PurgatoryError
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.service.helpers import TEST_CONFIG, until

N = 10_000
CHANNELS = 4
SIGNAL_BATCH = 1_000

SCALE_CONFIG = replace(
    TEST_CONFIG,
    purgatories=(PurgatorySettings(name="default", max_pending=N, retained_events=N),),
)


async def test_ten_thousand_concurrent_long_polls(serve) -> None:  # type: ignore[no-untyped-def]
    _, port = await serve(SCALE_CONFIG)
    target = f"127.0.0.1:{port}"
    own_connection = [("grpc.use_local_subchannel_pool", 1)]
    clients = [AsyncPurgatoryClient(target, options=own_connection) for _ in range(CHANNELS)]
    try:
        started = time.monotonic()
        waits = [
            asyncio.create_task(clients[i % CHANNELS].wait([f"key-{i}"], 300_000, timeout=120))
            for i in range(N)
        ]

        async def all_waiting() -> bool:
            if any(w.done() for w in waits):  # an early answer is a failure: surface it
                return True
            return (await clients[0].get_purgatory()).pending == N

        await until(all_waiting, timeout_s=60)
        assert not any(w.done() for w in waits)
        registered = time.monotonic()
        completed = 0
        for start in range(0, N, SIGNAL_BATCH):
            keys = [f"key-{i}" for i in range(start, start + SIGNAL_BATCH)]
            completed += (await clients[1].batch_check_and_complete(keys)).completed
        results = await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 60)
        finished = time.monotonic()
    finally:
        for c in clients:
            await c.close()
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} long-polls failed, first: {errors[0]!r}"
    assert completed == N
    states = {r.state for r in results if not isinstance(r, PurgatoryError | BaseException)}
    assert states == {OperationState.COMPLETED}
    assert sorted(r.sequence for r in results) == list(range(1, N + 1))  # type: ignore[union-attr]
    print(  # noqa: T201 - timing context for whoever reads the -s output
        f"{N} long-polls: registered in {registered - started:.1f}s, "
        f"answered in {finished - registered:.1f}s"
    )
