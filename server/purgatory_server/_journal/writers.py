"""WriterPool: a fixed set of writer threads serving the journals of a process.

A journal does its writing (write, fsync, roll, compact) on one writer thread, always the
same one: that is what orders its records and lets compaction run without locks against
appends. A pool of ``threads`` writer threads serves any number of journals: each journal
is assigned one thread (round robin) when it opens, and a thread serves its journals one
drain at a time, in the order they asked (a journal with more work queued goes to the
back). A journal that a standalone :meth:`~.journal.Journal.open` made without a pool
gets a private pool of one thread, as before.

What a thread knows of a journal is the :class:`Drainable` protocol: ``_drain`` (write
what is queued, serve requests, fsync if due; False once closed and drained),
``_fsync_wait`` (seconds until an interval fsync is due, None: none owed) and
``_stopped`` (set once the journal is done, or failed). A thread starts with its first
journal and ends when its last one is done, so an idle process holds no writer thread.

Failure: a journal handles its own I/O errors in ``_drain`` (docs/journal.md: it fails,
answers False, and the thread serves the others); an exception out of ``_drain`` is a
bug: every journal of that thread fails and the thread ends.

Thread safety: :meth:`WriterPool.assign` and :meth:`Writer.wake` may be called from any
thread; a journal's lock is never taken while a writer's is held.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Protocol

__all__ = ["Drainable", "Writer", "WriterPool"]


class Drainable(Protocol):
    """The journal as its writer thread sees it (see module docstring)."""

    @property
    def _stopped(self) -> threading.Event: ...

    def _drain(self) -> bool: ...

    def _fsync_wait(self) -> float | None: ...

    def _fail(self, exc: BaseException) -> None: ...


class Writer:
    """One writer thread and the journals assigned to it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._journals: set[Drainable] = set()
        self._ready: deque[Drainable] = deque()
        self._queued: set[Drainable] = set()
        # (monotonic deadline, tie-breaker, journal): interval fsyncs owed.
        self._timers: list[tuple[float, int, Drainable]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def attach(self, journal: Drainable) -> None:
        with self._cond:
            self._journals.add(journal)
            if self._thread is None:
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread = thread
                thread.start()

    def load(self) -> int:
        """Journals this thread serves now."""
        with self._cond:
            return len(self._journals)

    def wake(self, journal: Drainable) -> None:
        """``journal`` has work (an append, a request, a close): drain it soon."""
        with self._cond:
            if journal in self._journals and journal not in self._queued:
                self._queued.add(journal)
                self._ready.append(journal)
                self._cond.notify()

    def _wake_at(self, journal: Drainable, wait_s: float) -> None:
        with self._cond:
            heapq.heappush(self._timers, (time.monotonic() + wait_s, next(self._seq), journal))
            if self._timers[0][2] is journal:
                self._cond.notify()

    def _next(self) -> Drainable | None:
        """The next journal to drain; None once no journal is left (the thread ends)."""
        with self._cond:
            while True:
                timers = self._timers
                now = time.monotonic()
                while timers and timers[0][0] <= now:
                    journal = heapq.heappop(timers)[2]
                    if journal in self._journals and journal not in self._queued:
                        self._queued.add(journal)
                        self._ready.append(journal)
                if self._ready:
                    journal = self._ready.popleft()
                    self._queued.discard(journal)
                    return journal
                if not self._journals:
                    self._thread = None
                    self._timers.clear()
                    return None
                self._cond.wait(timers[0][0] - now if timers else None)

    def _done(self, journal: Drainable) -> None:
        with self._cond:
            self._journals.discard(journal)
            if journal in self._queued:
                self._queued.discard(journal)
                self._ready.remove(journal)
        journal._stopped.set()

    def _run(self) -> None:
        while (journal := self._next()) is not None:
            try:
                alive = journal._drain()
            except BaseException as exc:
                self._fail_all(exc)
                raise
            if not alive:
                self._done(journal)
                continue
            wait = journal._fsync_wait()
            if wait is not None:
                self._wake_at(journal, wait)

    def _fail_all(self, exc: BaseException) -> None:
        with self._cond:
            journals = list(self._journals)
            self._journals.clear()
            self._ready.clear()
            self._queued.clear()
            self._thread = None
        for journal in journals:
            journal._fail(exc)
            journal._stopped.set()


class WriterPool:
    """``threads`` writer threads (``<name>-<n>``) shared by the journals opened on it."""

    def __init__(self, threads: int = 4, name: str = "journal-writer") -> None:
        if threads <= 0:
            raise ValueError(f"threads must be positive, got {threads}")
        self._writers = [Writer(name if threads == 1 else f"{name}-{n}") for n in range(threads)]
        self._next = itertools.cycle(self._writers)
        self._lock = threading.Lock()

    def assign(self, journal: Drainable) -> Writer:
        """The writer that serves ``journal`` from now on (its thread started if idle)."""
        with self._lock:
            writer = next(self._next)
        writer.attach(journal)
        return writer

    def journals(self) -> int:
        """Journals the pool serves now."""
        return sum(writer.load() for writer in self._writers)
