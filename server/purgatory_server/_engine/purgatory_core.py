"""PurgatoryCore: the purgatory's machinery, compiled with the rest of the engine.

:class:`~purgatory_server._engine.purgatory.DelayedOperationPurgatory` is generic, so it
stays interpreted (see :mod:`~purgatory_server._engine._native`); everything it does lives
here, in a plain class typed on :class:`DelayedOperation` that it inherits without a Python
call layer. Why: the interpreted hot path cost too much CPU per request
(docs/benchmarks.md).

The public methods' docstrings state the purgatory's contracts; the class's own (memory,
thread safety, the empty key list) are on ``DelayedOperationPurgatory``.
"""

from __future__ import annotations

import logging
import threading
from _thread import RLock
from collections.abc import Hashable, Iterable, Sequence

from purgatory_server._engine._native import mypyc_attr
from purgatory_server._engine.counter import OperationEstimate
from purgatory_server._engine.delayed_operation import DelayedOperation
from purgatory_server._engine.reaper import ReaperSlot, TimerReaper
from purgatory_server._engine.system_timer import SystemTimer
from purgatory_server._engine.time import Time
from purgatory_server._engine.timer import Timer
from purgatory_server._engine.watchers import WatcherShard

__all__ = ["DEFAULT_SHARDS", "PurgatoryCore"]

logger = logging.getLogger("purgatory_server.purgatory")

DEFAULT_SHARDS = 512
REAPER_POLL_MS = 200
# Shards purged per advance_clock call while a purge is in progress; see advance_clock.
PURGE_SHARDS_PER_ADVANCE = 64


def _key_sequence(keys: Iterable[Hashable]) -> Sequence[Hashable]:
    """``keys`` as a sequence the operation may keep (its ``_watch_keys``): a tuple as it
    is, anything else copied once, since the caller may change or exhaust it."""
    return keys if type(keys) is tuple else list(keys)


@mypyc_attr(allow_interpreted_subclasses=True)
class PurgatoryCore:
    """The purgatory, untyped in its operation; ``DelayedOperationPurgatory`` is the public
    class."""

    def __init__(
        self,
        name: str,
        timer: Timer | None = None,
        purge_interval: int = 1000,
        reaper_enabled: bool = True,
        time: Time | None = None,
        *,
        shards: int = DEFAULT_SHARDS,
        unwatch_on_complete: bool = True,
        reaper: TimerReaper | None = None,
    ) -> None:
        if shards <= 0:
            raise ValueError(f"shards must be positive, got {shards}")
        self.name = name
        self._timer: Timer = (
            timer if timer is not None else SystemTimer(name, time=time, reaper=reaper)
        )
        # The same timer typed as the compiled SystemTimer where it is one (a Python
        # subclass included: its overrides still run), so arming is a native call.
        self._system_timer: SystemTimer | None = (
            self._timer if isinstance(self._timer, SystemTimer) else None
        )
        self.purge_interval = purge_interval
        self.unwatch_on_complete = unwatch_on_complete
        self._shards: list[WatcherShard] = [WatcherShard() for _ in range(shards)]
        self._estimated_total = OperationEstimate()
        # Shards a purge has yet to visit; only the thread in advance_clock touches it.
        self._purge_pending: list[WatcherShard] = []
        self._purge_lock = threading.Lock()
        self._stopping = threading.Event()
        self._reaper: threading.Thread | None = None
        # With a shared reaper (which drives the timer, given one attached to it): the
        # lazy mode's purge runs as its periodic task instead of after each advance.
        self._shared: TimerReaper | None = reaper
        self._purge_slot: ReaperSlot | None = None
        if reaper is not None:
            if reaper_enabled and not unwatch_on_complete:
                self._purge_slot = reaper.attach(
                    self._purge_tick, reaper.time.hi_res_clock_ms() + REAPER_POLL_MS
                )
        elif reaper_enabled:
            self._reaper = threading.Thread(
                target=self._reap, name=f"ExpirationReaper-{name}", daemon=True
            )
            self._reaper.start()

    @property
    def timer(self) -> Timer:
        return self._timer

    def _shard(self, key: Hashable) -> WatcherShard:
        return self._shards[hash(key) % len(self._shards)]

    def unwatch(self, operation: DelayedOperation) -> None:
        """Remove a completed ``operation`` from every key's list (any thread).

        Called by ``DelayedOperation.force_complete``'s winner. Takes each key's shard
        lock in turn, never two at once and never the operation's lock, so it nests
        safely inside ``try_complete`` (operation lock, then a shard lock, the same order
        as a watch).
        """
        _unwatch(self, operation)

    def try_complete_else_watch(
        self, operation: DelayedOperation, watch_keys: Iterable[Hashable]
    ) -> bool:
        """Complete ``operation`` now if it can be; otherwise watch its keys and arm it.

        Returns True if it completed during this call. The order is Kafka's: try; watch
        every key; try again (all under the operation's lock); only then add to the timer,
        cancelling the task if something completed the operation in between, so a
        completed operation never lingers in the wheel.
        """
        keys = _key_sequence(watch_keys)
        if _try_else_watch(self, operation, keys):
            return True
        completed = operation._completed
        if not completed.locked():
            system_timer = self._system_timer
            if system_timer is not None:
                system_timer.add(operation)
            else:
                self._timer.add(operation)
            if completed.locked():
                operation.cancel()
        return False

    def try_complete_else_watch_all(
        self, items: Iterable[tuple[DelayedOperation, Iterable[Hashable]]]
    ) -> list[bool]:
        """:meth:`try_complete_else_watch` for many operations; True where one completed.

        Same steps and guarantees as the single form, except that the pending operations
        are armed in one timer round after the whole batch is watched; each timeout counts
        from its arming. Thread safety: as :meth:`try_complete_else_watch`.
        """
        results: list[bool] = []
        armed: list[DelayedOperation] = []
        for operation, watch_keys in items:
            if _try_else_watch(self, operation, _key_sequence(watch_keys)):
                results.append(True)
                continue
            results.append(False)
            if not operation._completed.locked():
                armed.append(operation)
        if armed:
            self._arm_all(armed)
        return results

    def _arm_all(self, armed: list[DelayedOperation]) -> None:
        """Arm ``armed`` in one timer round; cancel again any that completed meanwhile."""
        # The Timer interface stays Kafka's four methods; a batch add is optional.
        system_timer = self._system_timer
        add_all = (
            system_timer.add_all
            if system_timer is not None
            else getattr(self._timer, "add_all", None)
        )
        if add_all is not None:
            add_all(armed)
        else:
            for operation in armed:
                self._timer.add(operation)
        for operation in armed:
            if operation._completed.locked():
                operation.cancel()

    def watch_and_arm_all(
        self, items: Iterable[tuple[DelayedOperation, Iterable[Hashable]]]
    ) -> None:
        """Watch and arm operations known not to be completable yet, without trying them.

        Contract: each ``try_complete`` would answer False and nothing can signal the keys
        before this call returns (a restart re-arming a recovered journal, or a server
        whose signals all run on the calling thread), so there is no race for try / watch /
        try to close. The batch is armed in one timer round; one completed meanwhile is
        cancelled again, so it never lingers in the wheel.
        """
        armed: list[DelayedOperation] = []
        for operation, watch_keys in items:
            _watch(self, operation, _key_sequence(watch_keys))
            if not operation._completed.locked():
                armed.append(operation)
        if armed:
            self._arm_all(armed)

    def check_and_complete(self, key: Hashable) -> int:
        """Try every operation watching ``key``; return how many this call completed.

        Completed operations leave the key's list, and an emptied key is dropped: each
        winner leaves its lists itself in the eager mode (``unwatch_on_complete``), so the
        key's entry is changed only in the lazy one. ``try_complete`` runs on a snapshot
        outside the shard lock, so a slow condition does not block other keys of the shard.
        """
        shards = self._shards
        shard = shards[hash(key) % len(shards)]
        ops = shard.snapshot(key)
        if not ops:
            return 0
        done: list[DelayedOperation] = []
        completed = 0
        for op in ops:
            if op._completed.locked():
                done.append(op)
            elif op.safe_try_complete():
                done.append(op)
                completed += 1
        if done and not self.unwatch_on_complete:
            shard.discard(key, done)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching ``key``; cancel the timers of its pending operations and return them.

        The returned operations are neither completed nor expired: the caller decides
        their fate. Operations already completed are dropped silently.
        """
        cancelled: list[DelayedOperation] = []
        for op in self._shard(key).pop_key(key):
            if not op.is_completed():
                op.cancel()
                cancelled.append(op)
        return cancelled

    def watchers(self, key: Hashable) -> list[DelayedOperation]:
        """The operations watching ``key`` now (a copy; completed-but-unpurged ones included
        in the lazy mode); any thread."""
        return self._shard(key).snapshot(key)

    def is_watched(self, key: Hashable) -> bool:
        """True while some operation watches ``key`` (completed-but-unpurged ones included
        in the lazy mode); any thread. An answer about a key whose last operation is
        completing on another thread may be either."""
        return self._shard(key).has(key)

    def num_delayed(self) -> int:
        """Operations waiting in the timer (completion removes them at once)."""
        return self._timer.size()

    def watched(self) -> int:
        """Watch entries across all keys, completed-but-unpurged ones included; O(shards)."""
        return sum(shard.count for shard in self._shards)

    def watched_keys(self) -> int:
        return sum(shard.keys() for shard in self._shards)

    def advance_clock(self, timeout_ms: int) -> None:
        """Advance the timer, then (lazy mode only) purge if completed operations piled up.

        Unlike Kafka's one-go sweep, a purge visits ``PURGE_SHARDS_PER_ADVANCE`` shards per
        call and resumes on the next, so no sweep holds the reaper (and the GIL) long
        enough to make the next expiration late.
        """
        self._timer.advance_clock(timeout_ms)
        if self.unwatch_on_complete:
            return  # completed operations left their lists already: nothing to purge
        self._maybe_purge()

    def _purge_tick(self) -> int:
        """The shared reaper's periodic task (lazy mode): purge, then wake again later."""
        self._maybe_purge()
        shared = self._shared
        return -1 if shared is None else shared.time.hi_res_clock_ms() + REAPER_POLL_MS

    def _maybe_purge(self) -> None:
        with self._purge_lock:
            pending = self._purge_pending
            if not pending:
                delayed = self.num_delayed()
                if self._estimated_total.get() - delayed <= self.purge_interval:
                    return
                self._estimated_total.set(delayed)
                pending.extend(shard for shard in self._shards if shard.count)
            batch = pending[-PURGE_SHARDS_PER_ADVANCE:]
            del pending[-PURGE_SHARDS_PER_ADVANCE:]
        purged = sum(shard.purge_completed() for shard in batch)
        logger.debug("purgatory %s purged %d completed watch entries", self.name, purged)

    def _reap(self) -> None:
        while not self._stopping.is_set():
            try:
                self.advance_clock(REAPER_POLL_MS)
            except Exception:
                # The reaper is the only thing that expires operations: log and keep going.
                logger.exception("expiration reaper of purgatory %s failed", self.name)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop the reaper and the timer; pending operations are dropped, not expired."""
        self._stopping.set()
        shared = self._shared
        slot = self._purge_slot
        if shared is not None and slot is not None:
            self._purge_slot = None
            shared.detach(slot)
        self._timer.shutdown()  # wakes a reaper blocked in the delay queue at once
        reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout_s)


# Module functions, not methods: a compiled method called on an interpreted subclass's
# ``self`` goes through a Python-level lookup; a function is a direct C call. For the same
# reason the flag is read as ``_completed.locked()`` (the ``is_completed`` contract).


def _watch(core: PurgatoryCore, operation: DelayedOperation, keys: Sequence[Hashable]) -> None:
    """Add ``operation`` to every key's watcher list (called under its lock)."""
    if not keys:
        return
    shards = core._shards
    n = len(shards)
    if not core.unwatch_on_complete:
        for key in keys:
            shards[hash(key) % n].watch(key, operation)
        core._estimated_total.increment()
        return
    # The operation learns its keys before it is listed anywhere, so a force_complete on
    # another thread (which takes no operation lock) always finds the keys to leave. If
    # its unwatch runs mid-loop, the check after the loop removes the later keys.
    operation._watch_keys = keys
    operation._watcher = core
    for key in keys:
        shards[hash(key) % n].watch(key, operation)
    if operation._completed.locked():
        _unwatch(core, operation)


def _unwatch(core: PurgatoryCore, operation: DelayedOperation) -> None:
    shards = core._shards
    n = len(shards)
    for key in operation._watch_keys:
        shards[hash(key) % n].remove(key, operation)


def _try_else_watch(
    core: PurgatoryCore, operation: DelayedOperation, keys: Sequence[Hashable]
) -> bool:
    """Try; if not complete, watch ``keys`` and try once more, all under the lock.

    See ``DelayedOperation.safe_try_complete_or_else`` for the race this closes. A
    default ``RLock`` is taken with plain calls rather than ``with`` (see
    ``WatcherShard``).
    """
    lock = operation.lock
    if type(lock) is RLock:
        lock.acquire()
        try:
            return _try_watch_try(core, operation, keys)
        finally:
            lock.release()
    with lock:
        return _try_watch_try(core, operation, keys)


def _try_watch_try(
    core: PurgatoryCore, operation: DelayedOperation, keys: Sequence[Hashable]
) -> bool:
    if operation.try_complete():
        return True
    _watch(core, operation, keys)
    return operation.try_complete()
