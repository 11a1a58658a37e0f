"""The three timers ``bench.timer_scaling`` compares, behind one small interface: the
timing wheel (:class:`WheelImpl`), a lazily-cancelled ``heapq`` (:class:`HeapImpl`) and
asyncio's ``call_later`` on a mock clock (:class:`AsyncioImpl`). How each is driven, and why
that way, is in ``bench.timer_scaling``'s docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from purgatory_server import MockTime, SystemTimer, TimerTask

__all__ = ["FIRE_DELAY_MS", "HORIZON_MS", "AsyncioImpl", "HeapImpl", "Impl", "WheelImpl"]

HORIZON_MS = (30_000, 300_000)  # pending tasks: far enough out that none fire
FIRE_DELAY_MS = (1, 100)  # firing tasks: the purgatory's timeouts are of this order
CANCEL_YIELD_EVERY = 1_000  # asyncio insert+cancel yields to its loop this often


class Impl(Protocol):
    name: str

    def prefill(self, delays_ms: list[int]) -> None: ...

    def insert_cancel(self, delays_ms: list[int]) -> int: ...

    def insert_fire(self, delays_ms: list[int], batch: int) -> int: ...

    def close(self) -> None: ...


def _check_fired(name: str, fired: int, expected: int) -> None:
    if fired != expected:
        raise RuntimeError(f"{name}: {fired} tasks fired, expected {expected}")


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# --------------------------------------------------------------------------- wheel


class _CountingTask(TimerTask):
    """The cheapest possible task: running it bumps a shared counter."""

    __slots__ = ()
    fired: Iterator[int] = itertools.count()

    def run(self) -> None:
        next(_CountingTask.fired)


class WheelImpl:
    name = "wheel"

    def __init__(self) -> None:
        self.clock = MockTime(start_ms=1_000)
        self.timer = SystemTimer("bench", time=self.clock)

    def prefill(self, delays_ms: list[int]) -> None:
        add, task = self.timer.add, _CountingTask
        for d in delays_ms:
            add(task(d))

    def insert_cancel(self, delays_ms: list[int]) -> int:
        add, task = self.timer.add, _CountingTask
        with _no_gc():
            t0 = time.perf_counter_ns()
            for d in delays_ms:
                t = task(d)
                add(t)
                t.cancel()
            return time.perf_counter_ns() - t0

    def insert_fire(self, delays_ms: list[int], batch: int) -> int:
        timer, clock, task = self.timer, self.clock, _CountingTask
        add, advance, tick = timer.add, timer.advance_clock, clock.sleep
        _CountingTask.fired = counter = itertools.count()
        before = timer.size()
        with _no_gc():
            t0 = time.perf_counter_ns()
            for i in range(0, len(delays_ms), batch):
                for d in delays_ms[i : i + batch]:
                    add(task(d))
                tick(1)
                advance(0)
            while timer.size() > before:
                tick(1)
                advance(0)
            if not timer._wait_executor_idle(60.0):
                raise RuntimeError("wheel executor did not drain")
            elapsed = time.perf_counter_ns() - t0
        _check_fired("wheel", next(counter), len(delays_ms))
        return elapsed

    def close(self) -> None:
        self.timer.shutdown()


# --------------------------------------------------------------------------- heap


class HeapTimer:
    """The textbook alternative: a binary heap with lazy (mark-only) cancellation.

    Cancelled entries stay in the heap until they reach the top, or until they are more
    than half of it, when the heap is rebuilt without them (what asyncio does); that
    bounds memory at 2x the live entries. Single-threaded.
    """

    __slots__ = ("cancelled", "heap", "now", "seq")

    def __init__(self, now_ms: int) -> None:
        self.heap: list[list[Any]] = []
        self.seq = itertools.count()
        self.cancelled = 0
        self.now = now_ms

    def add(self, delay_ms: int, callback: Callable[[], object]) -> list[Any]:
        entry = [self.now + delay_ms, next(self.seq), callback]
        heapq.heappush(self.heap, entry)
        return entry

    def cancel(self, entry: list[Any]) -> None:
        if entry[2] is not None:
            entry[2] = None
            self.cancelled += 1
            heap = self.heap
            if self.cancelled * 2 > len(heap) > 100:
                heap[:] = [e for e in heap if e[2] is not None]
                heapq.heapify(heap)
                self.cancelled = 0

    def advance(self, now_ms: int) -> None:
        self.now = now_ms
        heap, pop = self.heap, heapq.heappop
        while heap and heap[0][0] <= now_ms:
            callback = pop(heap)[2]
            if callback is None:
                self.cancelled -= 1
            else:
                callback()

    def __len__(self) -> int:
        return len(self.heap) - self.cancelled


class HeapImpl:
    name = "heap"

    def __init__(self) -> None:
        self.timer = HeapTimer(1_000)
        self.fired = itertools.count()

    def prefill(self, delays_ms: list[int]) -> None:
        add, cb = self.timer.add, self.fired.__next__
        for d in delays_ms:
            add(d, cb)

    def insert_cancel(self, delays_ms: list[int]) -> int:
        add, cancel, cb = self.timer.add, self.timer.cancel, self.fired.__next__
        with _no_gc():
            t0 = time.perf_counter_ns()
            for d in delays_ms:
                cancel(add(d, cb))
            return time.perf_counter_ns() - t0

    def insert_fire(self, delays_ms: list[int], batch: int) -> int:
        timer = self.timer
        self.fired = counter = itertools.count()
        add, advance, cb = timer.add, timer.advance, counter.__next__
        before = len(timer)
        with _no_gc():
            t0 = time.perf_counter_ns()
            for i in range(0, len(delays_ms), batch):
                for d in delays_ms[i : i + batch]:
                    add(d, cb)
                advance(timer.now + 1)
            while len(timer) > before:
                advance(timer.now + 1)
            elapsed = time.perf_counter_ns() - t0
        _check_fired("heap", next(counter), len(delays_ms))
        return elapsed

    def close(self) -> None:
        self.timer.heap.clear()


# --------------------------------------------------------------------------- asyncio


class _MockClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` moves only when the benchmark moves it (seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.mock_now = 1.0

    def time(self) -> float:
        return self.mock_now


class AsyncioImpl:
    name = "asyncio"

    def __init__(self) -> None:
        self.loop = _MockClockLoop()
        self.fired = itertools.count()

    def prefill(self, delays_ms: list[int]) -> None:
        call_later, cb = self.loop.call_later, self.fired.__next__
        for d in delays_ms:
            call_later(d / 1000.0, cb)

    def insert_cancel(self, delays_ms: list[int]) -> int:
        loop = self.loop
        call_later, cb = loop.call_later, self.fired.__next__
        secs = [d / 1000.0 for d in delays_ms]

        async def body() -> int:
            t0 = time.perf_counter_ns()
            for i in range(0, len(secs), CANCEL_YIELD_EVERY):
                for s in secs[i : i + CANCEL_YIELD_EVERY]:
                    call_later(s, cb).cancel()
                await asyncio.sleep(0)
            return time.perf_counter_ns() - t0

        with _no_gc():
            return loop.run_until_complete(body())

    def insert_fire(self, delays_ms: list[int], batch: int) -> int:
        loop = self.loop
        self.fired = counter = itertools.count()
        call_later, cb = loop.call_later, counter.__next__
        secs = [d / 1000.0 for d in delays_ms]
        last_due = loop.mock_now + len(secs) / batch / 1000.0 + FIRE_DELAY_MS[1] / 1000.0

        async def body() -> int:
            t0 = time.perf_counter_ns()
            for i in range(0, len(secs), batch):
                for s in secs[i : i + batch]:
                    call_later(s, cb)
                loop.mock_now += 0.001
                await asyncio.sleep(0)
            while loop.mock_now <= last_due + 0.002:
                loop.mock_now += 0.001
                await asyncio.sleep(0)
            return time.perf_counter_ns() - t0

        with _no_gc():
            elapsed = loop.run_until_complete(body())
        _check_fired("asyncio", next(counter), len(delays_ms))
        return elapsed

    def close(self) -> None:
        for handle in list(self.loop._scheduled):  # type: ignore[attr-defined]
            handle.cancel()
        self.loop.close()
