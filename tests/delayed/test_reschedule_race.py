"""Reschedule racing expiry, cancel and force-complete at the tick boundary.

Several threads hammer the same operations while the real timer expires them: whatever
the interleaving, each operation ends exactly once (one ``on_end``), and a reschedule that
reports success never coexists with an outcome produced by a stale timer entry.
"""

from __future__ import annotations

import random
import threading
import time

from purgatory_server._engine.system_timer import SystemTimer
from purgatory_server._engine.time import SYSTEM_TIME, MockTime
from purgatory_server._service.core.operation import RemoteOperation, SignalSlot
from purgatory_server._service.core.progress import make_progress
from purgatory_server._service.model.conditions import ConditionSpec
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState

N = 300


def _operation(i: int, ended: list[RemoteOperation], lock: threading.Lock) -> RemoteOperation:
    spec = ConditionSpec()
    definition = OperationDefinition((), 2, spec, b"")
    progress = make_progress(spec, (), {}, data_limit=0, sources_limit=0)

    def on_end(op: RemoteOperation) -> None:
        with lock:
            ended.append(op)

    return RemoteOperation(f"op-{i}", definition, progress, slot=SignalSlot(SYSTEM_TIME, on_end))


def test_each_operation_ends_exactly_once_under_concurrent_reschedules() -> None:
    timer = SystemTimer("race", tick_ms=1, wheel_size=20)
    ended: list[RemoteOperation] = []
    lock = threading.Lock()
    ops = [_operation(i, ended, lock) for i in range(N)]
    for op in ops:
        timer.add(op)
    stop = threading.Event()

    def reaper() -> None:
        while not stop.is_set():
            timer.advance_clock(1)

    def rescheduler(seed: int) -> None:
        rng = random.Random(seed)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            op = rng.choice(ops)
            op.reschedule(timer, rng.choice((0, 1, 2, 3)), 0)

    def ender(seed: int) -> None:
        rng = random.Random(seed)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            op = rng.choice(ops)
            op.end(rng.choice((OperationState.CANCELLED, OperationState.FORCE_COMPLETED)))
            time.sleep(0.001)

    threads = [threading.Thread(target=reaper)]
    threads += [threading.Thread(target=rescheduler, args=(s,)) for s in range(3)]
    threads += [threading.Thread(target=ender, args=(10 + s,)) for s in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads[1:]:
            t.join(10)
        # Whatever is still pending must expire at its last deadline (a few ms away).
        bound = time.monotonic() + 5.0
        while any(not op.is_completed() for op in ops) and time.monotonic() < bound:
            time.sleep(0.01)
    finally:
        stop.set()
        threads[0].join(5)
        timer.shutdown()
    assert all(op.is_completed() for op in ops)
    assert len(ended) == N
    assert len({op.operation_id for op in ended}) == N
    states = {op.state for op in ops}
    assert states <= {
        OperationState.EXPIRED,
        OperationState.CANCELLED,
        OperationState.FORCE_COMPLETED,
    }
    assert timer.size() == 0
    # A finished operation refuses a reschedule and arms nothing.
    assert ops[0].reschedule(timer, 1, 0) is False


class _SpyLock:
    """A re-entrant lock that says when another thread starts waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.contended = threading.Event()
        self._owner = threading.get_ident()

    def __enter__(self) -> bool:
        if threading.get_ident() != self._owner:
            self.contended.set()
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_stale_expiry_waiting_for_the_lock_loses_to_a_reschedule() -> None:
    """The tick-boundary case, made deterministic with MockTime and the operation's lock:
    the executor already holds the old entry and waits for the lock while we reschedule;
    once it gets the lock it must see its entry is stale and leave the operation alone."""
    clock = MockTime(start_ms=0)
    timer = SystemTimer("stale", tick_ms=1, wheel_size=20, start_ms=0, time=clock)
    ended: list[RemoteOperation] = []
    try:
        op = _operation(0, ended, threading.Lock())
        op.delay_ms = 10
        spy = _SpyLock()
        op.lock = spy
        timer.add(op)
        with op.lock:
            clock.sleep(10)
            assert timer.advance_clock(0)  # the entry goes to the executor...
            assert spy.contended.wait(5.0)  # ...which is inside run(), waiting for the lock
            assert op.reschedule(timer, 100, 0)
        timer._wait_executor_idle(5.0)
        assert not op.is_completed() and ended == []
        assert timer.size() == 1
        clock.sleep(99)
        timer.advance_clock(0)
        timer._wait_executor_idle(5.0)
        assert not op.is_completed()
        clock.sleep(1)
        timer.advance_clock(0)
        timer._wait_executor_idle(5.0)
        assert op.is_completed() and ended == [op]
        assert op.state is OperationState.EXPIRED
    finally:
        timer.shutdown()
