"""TimerReaper: one thread that advances the clocks of many timers, and one executor.

Kafka gives each purgatory its own ``ExpirationReaper`` thread calling
``advance_clock(200)`` and its timer its own ``executor``. That is cheap for a broker's
handful of purgatories and not for thousands: a :class:`TimerReaper` serves every
:class:`~purgatory_server._engine.system_timer.SystemTimer` attached to it with one
thread, and lends them one :class:`~purgatory_server._engine.executor.TaskExecutor`.

What it knows of a timer is a :class:`ReaperSlot`: a ``drive`` callable (advance the
clock by what is due, answer the next wake-up in ms, -1 for none) and the earliest
wake-up it was told of. A timer calls :meth:`TimerReaper.wake` whenever its delay queue
gets a new head (and after each drive), so the reaper waits for the earliest head of all
timers, never polls, and an idle process costs no CPU.

Invariant: while a slot's timer holds a bucket due at ``t``, the heap holds an entry
``(e, slot)`` with ``e <= t`` for it, or the reaper is driving that slot (and re-reads
the head after). An entry whose ``e`` is no longer the slot's ``wake_at`` is stale and
skipped. Due-ness is judged on the injected :class:`Time` (every attached timer must use
the reaper's); how long to block is real time, as in the delay queue.

Lock order: a timer's lock, then its delay queue's, then the reaper's; the reaper thread
holds its own only while it touches the heap and calls ``drive`` without it.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._engine.executor import TaskExecutor
from purgatory_server._engine.time import SYSTEM_TIME, Time

__all__ = ["NEVER", "ReaperSlot", "TimerReaper"]

logger = logging.getLogger("purgatory_server.timer")

# ``wake_at`` of a slot that asked for nothing.
NEVER = 1 << 62
# After a drive raised: when to drive that slot again (what Kafka's reaper loop would do).
RETRY_MS = 200


@mypyc_attr(allow_interpreted_subclasses=True)
class ReaperSlot:
    """One attached timer (or periodic task): what to call and when it wants waking."""

    __slots__ = ("closed", "drive", "wake_at")

    def __init__(self, drive: Callable[[], int]) -> None:
        self.drive: Callable[[], int] | None = drive
        self.wake_at = NEVER
        self.closed = False


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerReaper:
    """The process's reaper thread (``name``) and executor (``executor-<name>``).

    Thread safety: every method may be called from any thread. The thread starts with the
    first :meth:`attach`; :meth:`shutdown` stops both threads and detaches everything.
    """

    def __init__(self, name: str = "ExpirationReaper", time: Time | None = None) -> None:
        self._name = name
        self._time: Time = time if time is not None else SYSTEM_TIME
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[int, int, ReaperSlot]] = []
        self._seq = 0
        self._slots = 0
        self._closed = False
        self._worker: threading.Thread | None = None
        self._executor = TaskExecutor(f"executor-{name}")

    @property
    def time(self) -> Time:
        return self._time

    @property
    def executor(self) -> TaskExecutor:
        """The executor the attached timers share for tasks already due when added."""
        return self._executor

    @property
    def thread(self) -> threading.Thread | None:
        """The reaper thread (None until the first attach)."""
        return self._worker

    def attached(self) -> int:
        """Slots attached and not detached."""
        return self._slots

    def attach(self, drive: Callable[[], int], wake_at: int = -1) -> ReaperSlot:
        """A slot calling ``drive`` when woken; ``wake_at`` (ms, -1: none) is its first."""
        slot = ReaperSlot(drive)
        with self._cond:
            if self._closed:
                raise RuntimeError("the reaper is shut down")
            self._slots += 1
            if self._worker is None:
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._worker = thread
                thread.start()
        if wake_at >= 0:
            self.wake(slot, wake_at)
        return slot

    def detach(self, slot: ReaperSlot) -> None:
        """Never call ``slot`` again; its heap entries are dropped as they come up."""
        with self._cond:
            if not slot.closed:
                slot.closed = True
                slot.drive = None  # the heap keeps only the slot, not the timer behind it
                self._slots -= 1

    def wake(self, slot: ReaperSlot, at_ms: int) -> None:
        """Drive ``slot`` once the clock reaches ``at_ms`` (-1: nothing; a later time
        than one already asked for changes nothing)."""
        if at_ms < 0:
            return
        with self._cond:
            if slot.closed or at_ms >= slot.wake_at:
                return
            slot.wake_at = at_ms
            heap = self._heap
            self._seq += 1
            heapq.heappush(heap, (at_ms, self._seq, slot))
            if heap[0][2] is slot:
                self._cond.notify()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop the reaper and the executor; nothing attached is driven again."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        thread = self._worker
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._executor.shutdown(timeout_s)

    def _next(self) -> ReaperSlot | None:
        """Wait for the earliest due entry; its slot (None: shut down). Resets the slot's
        ``wake_at`` so that what the drive offers is heard."""
        cond = self._cond
        heap = self._heap
        time = self._time
        with cond:
            while not self._closed:
                if not heap:
                    cond.wait()
                    continue
                due_ms, _, slot = heap[0]
                wait_ns = due_ms * 1_000_000 - time.nanoseconds()
                if wait_ns > 0:
                    cond.wait(wait_ns / 1e9)
                    continue
                heapq.heappop(heap)
                if slot.closed or due_ms != slot.wake_at:
                    continue  # stale: a later entry (or none) stands for the slot now
                slot.wake_at = NEVER
                return slot
            return None

    def _run(self) -> None:
        while True:
            slot = self._next()
            if slot is None:
                return
            drive = slot.drive
            if drive is None:
                continue
            try:
                next_ms = drive()
            except Exception:
                # The reaper expires every attached timer: log and keep going.
                logger.exception("timer reaper %s: a drive failed", self._name)
                next_ms = self._time.hi_res_clock_ms() + RETRY_MS
            self.wake(slot, next_ms)
