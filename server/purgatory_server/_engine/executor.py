"""The single thread on which a timer runs expired tasks.

Kafka runs expired tasks on a one-thread executor (``executor-<name>``) rather than on
the reaper, so a slow ``on_expiration`` delays later expirations but never the clock
itself, and never runs on a thread that called ``add``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from queue import SimpleQueue

from purgatory_server._engine.timer_task import TimerTaskEntry

__all__ = ["TaskExecutor", "run_entries"]

logger = logging.getLogger("purgatory_server.timer")

# What travels on the queue: a batch of entries with the check that stops it (its timer
# shut down), a barrier to set once everything queued before it has run, or None to stop.
_Item = tuple[Sequence[TimerTaskEntry], Callable[[], bool]] | threading.Event | None


def run_entries(entries: Sequence[TimerTaskEntry], stopped: Callable[[], bool]) -> None:
    """Run the tasks of ``entries`` in order on this thread; skip cancelled ones.

    ``stopped`` is checked before every task (a shutdown discards what has not started).
    A failing task is logged and the rest still run: one bad task must not kill the thread
    that runs every other task (the executor's, or the reaper's with ``inline_expiry``).
    """
    for entry in entries:
        if stopped():
            return
        task = entry.timer_task
        if task is None or entry.cancelled:
            continue
        try:
            task.run()
        except Exception:
            logger.exception("timer task %r raised", task)


class TaskExecutor:
    """A daemon thread draining batches of expired entries in submission order.

    ``submit`` takes whole batches (one clock advance's expiries, one ``put`` on a C
    ``SimpleQueue``, cheap for the reaper). A task cancelled after submission is skipped,
    and so is the rest of a batch once its ``stopped`` says so (its timer shut down: one
    executor may serve many timers); ``shutdown`` discards whatever has not started.
    """

    def __init__(self, name: str) -> None:
        self._queue: SimpleQueue[_Item] = SimpleQueue()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name=name, daemon=True)
        self._worker.start()

    @property
    def thread(self) -> threading.Thread:
        return self._worker

    def submit(self, entries: Sequence[TimerTaskEntry], stopped: Callable[[], bool]) -> None:
        if not self._closed:
            self._queue.put((entries, stopped))

    def _run(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            if self._closed:
                continue
            entries, stopped = item
            run_entries(entries, stopped)

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until everything submitted before this call has run; False on timeout.

        With MockTime, ``advance_clock(0)`` then ``wait_idle`` makes "everything due has
        fired" observable without sleeping (a FIFO barrier).
        """
        if self._closed or not self._worker.is_alive():
            return True
        barrier = threading.Event()
        self._queue.put(barrier)
        return barrier.wait(timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Discard queued tasks, let the running one finish, and join the thread."""
        self._closed = True
        self._queue.put(None)
        if threading.current_thread() is not self._worker:
            self._worker.join(timeout_s)
