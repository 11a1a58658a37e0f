"""Objects the stream path keeps per operation: a budget the hot path must stay within.

A Session stream on an in-memory purgatory (no sockets: what is counted is the service's,
not grpc's) registers frames of 100 watches, then signals them all. Counted with
``sys.getallocatedblocks`` after a full collection, so the figures are the blocks still
held, not timings:

- per pending operation: what a watch costs while it waits (the operation, its timer
  entry, its definition, keys and id, the table and watch-list slots, the session's);
- per finished pair: what stays once its outcome was sent (the retained window of
  outcomes and the dedup window of finished ids), and with both windows off nothing at
  all (a compiled build once leaked an object per operation, which only this shows).

The budgets are docs/benchmarks.md's ("Objects per operation"), with room for the
collector's and the dictionaries' amortised growth; both builds (compiled and pure
Python) must hold them.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import AsyncIterator, Callable

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.api.session_rpc import SessionStream
from purgatory_server._service.config.server_config import Limits, PurgatorySettings
from purgatory_server._service.core.registry import PurgatoryRegistry

PENDING_BLOCKS = 10.5  # per pending operation
FINISHED_BLOCKS = 16.5  # per finished pair, once its outcome is sent
LEFT_BLOCKS = 0.2  # per finished pair with no window retaining anything
OPERATIONS = 2000
FRAME = 100


class _Client:
    """Feeds frames to one SessionStream and counts what it sends back."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[pb.SessionRequest | None] = asyncio.Queue()
        self.acks = 0
        self.outcomes = 0
        self._sent = asyncio.Event()
        self._request_id = 0

    async def requests(self) -> AsyncIterator[pb.SessionRequest]:
        while (frame := await self.frames.get()) is not None:
            yield frame

    async def send(self, message: pb.SessionResponse) -> None:
        self.outcomes += len(message.outcomes)
        if message.HasField("ack"):
            assert not message.ack.code, message.ack.message
            self.acks += 1
        self._sent.set()

    async def until(self, done: Callable[[], bool]) -> None:
        while not done():
            self._sent.clear()
            await asyncio.wait_for(self._sent.wait(), 30)

    def frames_of(self, keys: list[str], signal: bool) -> list[pb.SessionRequest]:
        frames = []
        for start in range(0, len(keys), FRAME):
            self._request_id += 1
            part = keys[start : start + FRAME]
            frame = pb.SessionRequest(request_id=self._request_id, purgatory="default")
            if signal:
                frame.signals.extend(pb.KeySignal(key=k) for k in part)
            else:
                frame.watches.extend(pb.OperationSpec(keys=[k], timeout_ms=600_000) for k in part)
            frames.append(frame)
        return frames


async def _held(client: _Client, tag: str) -> tuple[float, float]:
    """Blocks held per pending operation, then per finished pair, for one wave."""
    keys = [f"{tag}-{i:06d}" for i in range(OPERATIONS)]
    watches, signals = client.frames_of(keys, False), client.frames_of(keys, True)
    acks, outcomes, frames = client.acks, client.outcomes, len(watches)
    gc.collect()
    before = sys.getallocatedblocks()
    for frame in watches:
        client.frames.put_nowait(frame)
    await client.until(lambda: client.acks == acks + frames)
    del watches
    gc.collect()
    pending = sys.getallocatedblocks()
    for frame in signals:
        client.frames.put_nowait(frame)
    total = acks + 2 * frames
    await client.until(lambda: client.acks == total and client.outcomes == outcomes + OPERATIONS)
    del signals
    gc.collect()
    finished = sys.getallocatedblocks()
    return (pending - before) / OPERATIONS, (finished - before) / OPERATIONS


async def _measured(settings: PurgatorySettings) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    registry = PurgatoryRegistry(Limits(), settings, loop, reaper_enabled=False)
    registry.create(registry.settings_for("default", None))
    client = _Client()
    session = SessionStream(registry, loop)
    stream = asyncio.ensure_future(session.run(client.requests(), client.send))
    try:
        await _held(client, "warm-up")  # first-use allocations (tables, caches) settle here
        return await _held(client, "counted")
    finally:
        client.frames.put_nowait(None)
        await stream
        await registry.shutdown()


async def test_the_stream_path_keeps_few_objects_per_operation() -> None:
    per_pending, per_finished = await _measured(PurgatorySettings())
    assert 1 <= per_pending <= PENDING_BLOCKS, per_pending
    assert per_pending < per_finished <= FINISHED_BLOCKS, per_finished


async def test_an_ended_operation_leaves_nothing_behind() -> None:
    nothing_kept = PurgatorySettings(dedup_window_ms=0, retained_events=1)
    per_pending, per_finished = await _measured(nothing_kept)
    assert 1 <= per_pending <= PENDING_BLOCKS, per_pending
    assert abs(per_finished) <= LEFT_BLOCKS, per_finished


async def test_a_listed_purgatory_keeps_no_sorted_index_per_operation() -> None:
    """One ListOperations (a `purgatory ls`) must not make every later watch and end pay
    for the listing's sorted index: they leave it alone until the next listing, which
    brings it up to date and lists exactly what is pending."""
    loop = asyncio.get_running_loop()
    registry = PurgatoryRegistry(Limits(), PurgatorySettings(), loop, reaper_enabled=False)
    named = registry.create(registry.settings_for("default", None))
    table = named._table  # the index is what is checked
    client = _Client()
    session = SessionStream(registry, loop)
    stream = asyncio.ensure_future(session.run(client.requests(), client.send))
    try:
        index = table.view(lambda _key: []).pending_ids  # the first listing builds it
        assert len(index) == 0
        keys = [f"listed-{i:06d}" for i in range(OPERATIONS)]
        watches = client.frames_of(keys, False)
        for frame in watches:
            client.frames.put_nowait(frame)
        await client.until(lambda: client.acks == len(watches))
        assert len(table.pending) == OPERATIONS
        assert table.pending_ids is index and len(index) == 0  # untouched by the watches
        listed = list(table.view(lambda _key: []).pending_ids)
        assert listed == sorted(table.pending)  # the next listing sees every one
        signals = client.frames_of(keys, True)
        for frame in signals:
            client.frames.put_nowait(frame)
        done = len(watches) + len(signals)
        await client.until(lambda: client.acks == done and client.outcomes == OPERATIONS)
        assert not table.pending
        assert len(index) == OPERATIONS  # the ends left it alone too
        remaining = [i for i in table.view(lambda _key: []).pending_ids if i in table.pending]
        assert remaining == []
    finally:
        client.frames.put_nowait(None)
        await stream
        await registry.shutdown()
