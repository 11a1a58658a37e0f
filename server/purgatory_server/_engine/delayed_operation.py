"""DelayedOperation: a timer task that can also be completed early, exactly once."""

from __future__ import annotations

import threading
from _thread import LockType, RLock
from abc import abstractmethod
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._engine.timer_task import TimerTask

__all__ = ["DelayedOperation"]

# Any context-manager lock: threading.Lock, threading.RLock, or a shared one.
Lock = AbstractContextManager[Any]


class WatchRegistry(Protocol):
    """Whoever watches an operation on keys and wants it back when it completes."""

    def unwatch(self, operation: DelayedOperation) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation(TimerTask):
    """An operation that completes when ``try_complete`` says so, or expires.

    Subclasses implement:

    - ``try_complete()``: check the condition; if met, return ``self.force_complete()``
      (so only the caller that actually completes it sees True), else False.
      Called with the operation's lock held.
    - ``on_complete()``: the completion action; runs exactly once, on whichever thread
      won ``force_complete``.
    - ``on_expiration()``: runs after ``on_complete`` when the timeout ended it, on the
      timer's executor thread.

    Completion is a one-shot flag (a non-blocking ``Lock.acquire``, a real atomic
    compare-and-set), so when a signal, a ``ForceComplete`` and the reaper race, exactly
    one of them wins and ``on_complete`` runs once. ``lock`` guards ``try_complete``; pass a
    shared one when several operations read the same state (Kafka passes the partition
    lock to DelayedProduce). The default is re-entrant, so ``try_complete`` may call
    ``force_complete`` which may call back into code that takes the lock again.
    """

    __slots__ = ("_completed", "_watch_keys", "_watcher", "lock")

    def __init__(
        self, delay_ms: int, lock: Lock | None = None, completed: LockType | None = None
    ) -> None:
        """``completed``: the completion flag to start from (an unlocked ``Lock``), for a
        subclass that shares one among its operations; a fresh one by default. Pass it here
        rather than assign it in the subclass's ``__init__``: compiled (mypyc), that
        assignment took the field for unset and never released the lock created here (one
        leaked object per operation)."""
        super().__init__(delay_ms)
        # ``_thread.RLock`` is what ``threading.RLock()`` returns, without the factory call.
        self.lock: Lock = lock if lock is not None else RLock()
        self._completed = completed if completed is not None else threading.Lock()
        # Set by a purgatory that removes completed operations from its watch lists at
        # once (DelayedOperationPurgatory's default); None keeps Kafka's lazy removal.
        self._watcher: WatchRegistry | None = None
        self._watch_keys: Sequence[Hashable] = ()

    @abstractmethod
    def try_complete(self) -> bool: ...

    @abstractmethod
    def on_complete(self) -> None: ...

    @abstractmethod
    def on_expiration(self) -> None: ...

    def force_complete(self) -> bool:
        """Complete now; True only for the single caller that completed it.

        The winner cancels the timer task first (so the reaper will not run it), leaves its
        watch lists (when its purgatory asked for that), then calls ``on_complete``.
        """
        if self._completed.acquire(False):  # positional: no keyword dict per call
            self.cancel()
            watcher = self._watcher
            if watcher is not None:
                watcher.unwatch(self)
            self.on_complete()
            return True
        return False

    def is_completed(self) -> bool:
        return self._completed.locked()

    def safe_try_complete(self) -> bool:
        """``try_complete`` under the operation's lock."""
        with self.lock:
            return self.try_complete()

    def safe_try_complete_or_else(self, action: Callable[[], None]) -> bool:
        """Try; if not complete, run ``action`` (e.g. start watching) and try once more.

        Both tries and the action run under the lock, which closes the race in which the
        condition becomes true after the first try but before the watch is in place: the
        signal that made it true either saw the watch, or the second try sees the signal.
        """
        with self.lock:
            if self.try_complete():
                return True
            action()
            return self.try_complete()

    def run(self) -> None:
        """Expiry path, called by the timer: complete and expire unless already done."""
        with self.lock:
            if self.force_complete():
                self.on_expiration()
