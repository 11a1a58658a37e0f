"""The single thread on which a timer runs expired tasks.

Kafka runs expired tasks on a one-thread executor (``executor-<name>``) rather than on
the reaper, so a slow ``on_expiration`` delays later expirations but never the clock
itself, and never runs on a thread that called ``add``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable

from purgatory_server._engine.timer_task import TimerTaskEntry

__all__ = ["TaskExecutor"]

logger = logging.getLogger("purgatory_server.timer")


class TaskExecutor:
    """A daemon thread draining a queue of expired entries in submission order.

    ``submit`` takes whole batches: the reaper hands over everything one clock advance
    expired in a single call (one lock round-trip and at most one wake-up per batch).
    A task whose entry was cancelled after it was submitted is skipped.
    """

    def __init__(self, name: str) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._pending: deque[TimerTaskEntry] = deque()
        self._running = False
        self._closed = False
        self._idle_waiters = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, entries: Iterable[TimerTaskEntry]) -> None:
        with self._cond:
            if self._closed:
                return
            was_empty = not self._pending
            self._pending.extend(entries)
            if was_empty and self._pending and not self._running:
                self._cond.notify()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._pending and not self._closed:
                    self._running = False
                    if self._idle_waiters:
                        cond.notify_all()
                    cond.wait()
                if self._closed:
                    self._running = False
                    cond.notify_all()
                    return
                batch = self._pending
                self._pending = deque()
                self._running = True
            for entry in batch:
                if self._closed:
                    break
                task = entry.timer_task
                if task is None or entry.cancelled:
                    continue
                try:
                    task.run()
                except Exception:
                    # A failing task must not kill the thread that runs every other task.
                    logger.exception("timer task %r raised", task)

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until everything submitted so far has run; False on timeout.

        For tests and orderly hand-offs: with MockTime, ``advance_clock(0)`` followed by
        ``wait_idle`` makes "everything due has fired" observable without sleeping.
        """
        with self._cond:
            self._idle_waiters += 1
            try:
                return self._cond.wait_for(
                    lambda: self._closed or (not self._pending and not self._running),
                    timeout_s,
                )
            finally:
                self._idle_waiters -= 1

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Discard queued tasks, let the running one finish, and join the thread."""
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
