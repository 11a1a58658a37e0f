"""DelayedOperationPurgatory: operations waiting on keys, with timeouts."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Generic, TypeVar

from purgatory_server._engine.delayed_operation import DelayedOperation
from purgatory_server._engine.purgatory_core import PurgatoryCore

__all__ = ["DelayedOperationPurgatory"]

T = TypeVar("T", bound=DelayedOperation)


class DelayedOperationPurgatory(PurgatoryCore, Generic[T]):
    """Kafka's purgatory: watch operations by key, complete them on signal or expiry.

    An operation is watched on every key it is given and armed in the timer. It ends in
    exactly one of three ways: a ``check_and_complete(key)`` finds its condition met, the
    timer expires it (``run`` -> ``on_expiration``), or someone calls ``force_complete``.
    Keys are any hashable values. **An empty key list is allowed**: the operation is then
    a pure timer (a delayed message, "cancel the order in 30 minutes") that only expiry or
    ``force_complete`` can end.

    Memory: by default (``unwatch_on_complete=True``) an operation leaves every key's
    list the moment it completes, however it completes, so ``watched()`` and
    ``watched_keys()`` are exact and no completed operation is kept alive by a key nobody
    signals again. Kafka instead removes lazily (on check, or in a purge once
    ``estimated_total - num_delayed`` exceeds ``purge_interval``), and brokers have run out
    of memory on the gap (KAFKA-19567, KAFKA-19389); ``unwatch_on_complete=False`` restores
    that behaviour exactly. Empty per-key lists are removed.

    Thread safety: every public method may be called from any thread. The reaper thread
    ``ExpirationReaper-<name>`` (when enabled) calls ``advance_clock(200)`` in a loop;
    given a shared ``reaper`` (:class:`~purgatory_server._engine.reaper.TimerReaper`) the
    purgatory starts no thread: that reaper drives its timer (and, in the lazy mode, its
    purge every 200 ms), so any number of purgatories share two threads.

    The methods are the compiled
    :class:`~purgatory_server._engine.purgatory_core.PurgatoryCore`'s; this class only adds
    the operation type ``T`` for the type checker.
    """

    if TYPE_CHECKING:
        # The core's signatures with ``T`` for ``DelayedOperation``; the narrowing is what
        # the type parameter means, hence the ignores.
        def try_complete_else_watch(  # type: ignore[override]
            self, operation: T, watch_keys: Iterable[Hashable]
        ) -> bool: ...

        def try_complete_else_watch_all(  # type: ignore[override]
            self, items: Iterable[tuple[T, Iterable[Hashable]]]
        ) -> list[bool]: ...

        def watch_and_arm_all(  # type: ignore[override]
            self, items: Iterable[tuple[T, Iterable[Hashable]]]
        ) -> None: ...

        def cancel_for_key(self, key: Hashable) -> list[T]: ...  # type: ignore[override]

        def watchers(self, key: Hashable) -> list[T]: ...  # type: ignore[override]
