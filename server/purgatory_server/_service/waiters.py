"""Long-poll waiters: an asyncio future per waiting call, never a thread.

A waiting ``TryCompleteElseWatch(wait=true)`` parks on a :class:`Waiter` attached to its
operation; a batch long-poll parks on one :class:`BatchWaiter` attached to every
operation of the batch (one future for the whole batch, not one per operation). When the
caller goes away its RPC task is cancelled, the waiter is detached, and the operation
stays in the purgatory untouched.

Thread safety: loop-confined. Waiters are created, attached, resolved and detached on
the event loop thread only (outcomes are published there by the inbox).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from purgatory_server._service.events import Outcome
    from purgatory_server._service.operation import RemoteOperation

__all__ = ["BatchWaiter", "Waiter", "wait_for_outcomes"]


class Waiter:
    """Resolved with the outcome of one operation, or failed (shutdown)."""

    __slots__ = ("future",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[None] = loop.create_future()

    def deliver(self, outcome: Outcome) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class BatchWaiter(Waiter):
    """Resolved once ``remaining`` operations have delivered their outcomes."""

    __slots__ = ("remaining",)

    def __init__(self, loop: asyncio.AbstractEventLoop, remaining: int) -> None:
        super().__init__(loop)
        self.remaining = remaining

    def deliver(self, outcome: Outcome) -> None:
        self.remaining -= 1
        if self.remaining <= 0 and not self.future.done():
            self.future.set_result(None)


async def wait_for_outcomes(
    loop: asyncio.AbstractEventLoop, operations: Sequence[RemoteOperation]
) -> None:
    """Return once every operation has a published outcome.

    Raises what the waiter was failed with (e.g. ShuttingDown). On cancellation (the
    caller went away) the waiter is detached from every operation before re-raising.
    """
    pending = [op for op in operations if op.outcome is None]
    if not pending:
        return
    waiter = Waiter(loop) if len(pending) == 1 else BatchWaiter(loop, len(pending))
    for op in pending:
        op.waiters.append(waiter)
    try:
        await waiter.future
    finally:
        # Detach from operations still pending (caller gone, or a shutdown failure).
        for op in pending:
            if op.outcome is None and waiter in op.waiters:
                op.waiters.remove(waiter)
