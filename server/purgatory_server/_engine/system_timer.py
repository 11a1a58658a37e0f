"""SystemTimer: the hierarchical timing wheel driven by a delay queue of buckets."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._engine.counter import TaskCounter
from purgatory_server._engine.delay_queue import DelayQueue
from purgatory_server._engine.executor import TaskExecutor, run_entries
from purgatory_server._engine.reaper import ReaperSlot, TimerReaper
from purgatory_server._engine.time import SYSTEM_TIME, Time
from purgatory_server._engine.timer_task import TimerTask, TimerTaskEntry
from purgatory_server._engine.timing_wheel import TimingWheel

__all__ = ["SystemTimer"]


@mypyc_attr(allow_interpreted_subclasses=True)
class SystemTimer:
    """Kafka's SystemTimer: O(1) add and cancel, clock advanced bucket by bucket.

    Thread safety: ``add`` may be called from any thread. ``advance_clock`` holds the
    timer lock while it drains due buckets, so no ``add`` interleaves with a flush (which
    re-inserts relative to the new ``current_time``). One mutex replaces Kafka's
    read/write lock: under the GIL adds cannot run in parallel anyway. Waiting for the next
    due bucket happens outside the lock, so a waiting reaper never delays an add.

    Expired tasks run on the ``executor-<executor_name>`` thread, never on the thread that
    called ``add`` or ``advance_clock``, unless ``inline_expiry`` is set: then they run on
    the advancing thread (the reaper), in order, after it releases the lock. That suits
    tasks that only hand off to another thread (saving a thread hop); the price is Kafka's
    reason for the executor: a slow task delays later expirations. Tasks already due when
    added always go to the executor.

    With a ``reaper`` (:class:`~.reaper.TimerReaper`) the timer starts no thread: it
    runs its already-due tasks on the reaper's executor, and the reaper's thread calls
    ``advance_clock`` whenever the timer's earliest bucket is due (the timer tells it of
    each new earliest bucket). It must then run on the reaper's clock. ``advance_clock``
    may still be called by hand meanwhile. ``shutdown`` detaches it; the shared threads
    go on.
    """

    def __init__(
        self,
        executor_name: str,
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int | None = None,
        time: Time | None = None,
        *,
        inline_expiry: bool = False,
        reaper: TimerReaper | None = None,
    ) -> None:
        if reaper is not None and time is not None and time is not reaper.time:
            raise ValueError("a timer driven by a reaper must use the reaper's clock")
        if time is None:
            time = reaper.time if reaper is not None else SYSTEM_TIME
        self._time: Time = time
        self._inline_expiry = inline_expiry
        self._task_counter = TaskCounter()
        self._reaper = reaper
        self._slot: ReaperSlot | None = None
        self._delay_queue = DelayQueue(self._time, None if reaper is None else self._on_new_head)
        self._timing_wheel = TimingWheel(
            tick_ms=tick_ms,
            wheel_size=wheel_size,
            start_ms=start_ms if start_ms is not None else self._time.hi_res_clock_ms(),
            task_counter=self._task_counter,
            queue=self._delay_queue,
        )
        self._lock = threading.Lock()
        self._acquire = self._lock.acquire  # bound once: see WatcherShard
        self._release = self._lock.release
        self._executor = (
            TaskExecutor(f"executor-{executor_name}") if reaper is None else reaper.executor
        )
        self._shutdown = False
        if reaper is not None:
            self._slot = reaper.attach(self._drive)

    @property
    def time(self) -> Time:
        return self._time

    @property
    def timing_wheel(self) -> TimingWheel:
        return self._timing_wheel

    def add(self, task: TimerTask) -> None:
        self._acquire()
        try:
            entry = TimerTaskEntry(task, task.delay_ms + self._time.hi_res_clock_ms())
            if not self._timing_wheel.add(entry) and not entry.cancelled:
                # Already due: run it now, but on the executor, not on this thread.
                self._executor.submit((entry,), self._is_shut_down)
        finally:
            self._release()

    def add_all(self, tasks: Iterable[TimerTask]) -> None:
        """``add`` for many tasks with one lock round and one clock reading.

        Equivalent to calling :meth:`add` for each task at the same instant; same
        thread-safety contract.
        """
        due: list[TimerTaskEntry] = []
        wheel_add = self._timing_wheel.add
        with self._lock:
            now = self._time.hi_res_clock_ms()
            for task in tasks:
                entry = TimerTaskEntry(task, task.delay_ms + now)
                if not wheel_add(entry) and not entry.cancelled:
                    due.append(entry)
            if due:
                self._executor.submit(due, self._is_shut_down)

    def advance_clock(self, timeout_ms: int) -> bool:
        fired = self._advance(timeout_ms)
        if self._slot is not None:
            self._rehint()  # a hand-driven advance may have taken the head the reaper knew
        return fired

    def _on_new_head(self, expiration_ms: int) -> None:
        slot = self._slot
        reaper = self._reaper
        if slot is not None and reaper is not None:
            reaper.wake(slot, expiration_ms)

    def _rehint(self) -> None:
        self._on_new_head(self._delay_queue.head())

    def _drive(self) -> int:
        """The reaper's call: what is due, then the next wake-up (ms; -1: none)."""
        self._advance(0)
        return self._delay_queue.head()

    def _advance(self, timeout_ms: int) -> bool:
        bucket = self._delay_queue.poll(timeout_ms)
        if bucket is None:
            return False
        expired: list[TimerTaskEntry] = []
        wheel = self._timing_wheel
        poll_due = self._delay_queue.poll
        with self._lock:
            while bucket is not None:
                wheel.advance_clock(bucket.expiration)
                # Re-inserting cascades an entry down to a finer wheel, or reports it due.
                for entry in bucket.flush():
                    if not wheel.add(entry) and not entry.cancelled:
                        expired.append(entry)
                bucket = poll_due(0)
        if expired:
            if self._inline_expiry:
                run_entries(expired, self._is_shut_down)
            else:
                self._executor.submit(expired, self._is_shut_down)
        return True

    def _is_shut_down(self) -> bool:
        return self._shutdown

    def size(self) -> int:
        return self._task_counter.get()

    def shutdown(self) -> None:
        """Wake and release any blocked ``advance_clock``, stop the executor (detach from
        the reaper), drop the rest."""
        self._shutdown = True
        self._delay_queue.close()
        reaper = self._reaper
        slot = self._slot
        if reaper is not None and slot is not None:
            self._slot = None
            reaper.detach(slot)
        else:
            self._executor.shutdown()

    def _wait_executor_idle(self, timeout_s: float = 10.0) -> bool:
        """Test hook: block until every task handed to the executor so far has run."""
        return self._executor.wait_idle(timeout_s)
