"""The Timer interface the purgatory depends on.

The purgatory needs only these four operations, so it can run on any timer that keeps
this contract (the hierarchical :class:`SystemTimer`, or a test double).
"""

from __future__ import annotations

from typing import Protocol

from purgatory_server._engine.timer_task import TimerTask

__all__ = ["Timer"]


class Timer(Protocol):
    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; may be called concurrently."""
        ...

    def advance_clock(self, timeout_ms: int) -> bool:
        """Run what is due, waiting up to ``timeout_ms`` for something to be; True if any."""
        ...

    def size(self) -> int:
        """Number of tasks waiting (not yet run, not cancelled)."""
        ...

    def shutdown(self) -> None:
        """Stop; tasks not yet run are discarded."""
        ...
