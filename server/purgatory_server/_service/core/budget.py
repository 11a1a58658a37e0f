"""The server's memory budget: every byte a client can make the server hold, charged.

One budget per server (``limits.memory_budget_bytes``; 0: ``memory_budget_percent`` of
the machine's memory, or of the cgroup's limit when that is lower), in two pools:

- **held** (the budget less the retained pool): what pending work holds until it ends:
  pending operations (charged at registration, released when they end), the signal data
  they accumulate (once per shared :class:`~.signal_data.DataLink`, released when no
  operation refers to it), and stream buffers. Each purgatory may hold at most its share
  (``purgatory_memory_percent`` of the pool), so none can starve the others. What does
  not fit is refused with RESOURCE_EXHAUSTED (:class:`~.errors.LimitExceeded`); a single
  request larger than a whole share can never fit: INVALID_ARGUMENT.
- **retained** (``retained_memory_percent`` of the budget): the retained outcome windows
  and finished-id memories (:class:`Reclaimable`). Nothing is refused for it: past the
  pool, the largest holder forgets its oldest entries first (a subscriber resuming before
  them gets OUT_OF_RANGE, a re-sent id before them registers anew), as past
  ``retained_events`` or the dedup window.

``max_total_pending`` and ``max_pending_payload_bytes`` apply on top. Charges are
estimates from lengths (:mod:`.sizes`), rounded up.

Recovered operations (durable purgatories at start-up) are charged but never refused:
what a restart brings back is kept even beyond the budget, and new operations are refused
until enough have ended.

Thread-safety: loop-confined, like the registry and purgatories that update it, except
:meth:`Account.free_later`, which any thread may call (a data link can die on the timer's
thread): it queues the release on a deque (appends are atomic) drained by the loop.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.model.errors import InvalidArgument, LimitExceeded

__all__ = ["Account", "Reclaimable", "ServerBudget", "machine_memory"]

logger = logging.getLogger("purgatory_server.service")

_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def machine_memory() -> int:
    """Physical memory, or the cgroup's memory limit where that is lower (a container)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


class Reclaimable(Protocol):
    """A memory of the retained pool that can forget its oldest entry."""

    @property
    def retained_bytes(self) -> int: ...

    def shed(self) -> int:
        """Forget the oldest entry; the bytes that frees (0: nothing left to forget)."""
        ...


class RetainedWindow(Reclaimable, Protocol):
    """The retained window (:class:`~.event_log.EventLog`), charged through ``retain``."""

    def charge_to(self, retain: Callable[[int], None]) -> None: ...


class ServerBudget:
    """The server-wide byte budget (module docstring); loop-confined."""

    __slots__ = (
        "_freed",
        "_holders",
        "_limits",
        "capacity",
        "held",
        "held_capacity",
        "payload_bytes",
        "pending",
        "retained",
        "retained_capacity",
        "share",
    )

    def __init__(self, limits: Limits, memory: int | None = None) -> None:
        """``memory``: the machine's memory (default :func:`machine_memory`), read only
        when ``limits.memory_budget_bytes`` is 0."""
        self._limits = limits
        capacity = limits.memory_budget_bytes
        if not capacity:
            machine = machine_memory() if memory is None else memory
            capacity = machine * limits.memory_budget_percent // 100
        self.capacity = capacity
        self.retained_capacity = capacity * limits.retained_memory_percent // 100
        self.held_capacity = capacity - self.retained_capacity
        self.share = self.held_capacity * limits.purgatory_memory_percent // 100
        self.held = 0
        self.retained = 0
        self.pending = 0
        self.payload_bytes = 0
        # (account, bytes) released from another thread, applied by drain() on the loop.
        self._freed: deque[tuple[Account, int]] = deque()
        self._holders: list[Reclaimable] = []

    def account(self, name: str) -> Account:
        """A purgatory's share of the budget."""
        return Account(self, name)

    # ----------------------------------------------------------------- stream buffers
    def try_charge(self, nbytes: int) -> bool:
        """Charge ``nbytes`` of a stream's buffer (Subscribe, Session) to the held pool;
        False, charging nothing, if they do not fit. Every successful charge is given back
        with :meth:`release`. Loop thread only."""
        self.drain()
        if self.held + nbytes > self.held_capacity:
            return False
        self.held += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """Give back ``nbytes`` charged by :meth:`try_charge` or :meth:`charge_owed`
        (loop thread)."""
        self.held -= nbytes

    def charge_owed(self, nbytes: int) -> None:
        """Charge ``nbytes`` a stream owes its client and cannot refuse (a Session's
        outcomes of operations it watched). The pool may pass its capacity for a moment;
        new registrations are refused until the stream sends them (the Session's own bound
        keeps what one stream owes finite). Loop thread only."""
        self.held += nbytes

    # ----------------------------------------------------------------- retained pool
    def add_holder(self, holder: Reclaimable) -> None:
        self._holders.append(holder)

    def remove_holder(self, holder: Reclaimable) -> None:
        if holder in self._holders:
            self._holders.remove(holder)
            self.retained -= holder.retained_bytes

    def retain(self, nbytes: int) -> None:
        """A holder keeps ``nbytes`` more (negative: fewer); past the pool, the largest
        holders forget their oldest entries until it fits again."""
        self.retained += nbytes
        if self.retained > self.retained_capacity and nbytes > 0:
            self.reclaim()

    def reclaim(self) -> None:
        """Shed the largest holder's oldest entries until the pool fits, moving on to the
        next largest when it gets below it (one scan of the holders per switch, not per
        entry)."""
        holders = self._holders
        while self.retained > self.retained_capacity and holders:
            ranked = heapq.nlargest(2, holders, key=_retained_bytes)
            largest = ranked[0]
            floor = ranked[1].retained_bytes if len(ranked) > 1 else 0
            while self.retained > self.retained_capacity:
                freed = largest.shed()
                if freed <= 0:
                    return  # the largest holds nothing: neither does any other
                self.retained -= freed
                if largest.retained_bytes < floor:
                    break

    # ----------------------------------------------------------------- bookkeeping
    def drain(self) -> None:
        """Apply the releases queued by other threads (:meth:`Account.free_later`)."""
        freed = self._freed
        while freed:
            account, nbytes = freed.popleft()
            if account.closed:
                continue
            account.held -= nbytes
            self.held -= nbytes


def _retained_bytes(holder: Reclaimable) -> int:
    return holder.retained_bytes


class Account:
    """One purgatory's part of the :class:`ServerBudget` (loop-confined but for
    :meth:`free_later`)."""

    __slots__ = ("budget", "closed", "held", "holders", "name")

    def __init__(self, budget: ServerBudget, name: str) -> None:
        self.budget = budget
        self.name = name
        self.held = 0
        # Set by close(): later releases (data links dying after) were released by it.
        self.closed = False
        self.holders: tuple[Reclaimable, ...] = ()

    def hold(self, window: RetainedWindow, *others: Reclaimable) -> None:
        """Charge the purgatory's retained window (and ``others``, which charge their
        entries themselves) to the retained pool; they shed when it is full."""
        self.holders = (window, *others)
        for holder in self.holders:
            self.budget.add_holder(holder)
        window.charge_to(self.retain)

    def retain(self, nbytes: int) -> None:
        """A holder of this purgatory keeps ``nbytes`` more (:meth:`ServerBudget.retain`);
        nothing once the purgatory is gone (its holders left the pool with it)."""
        if not self.closed:
            self.budget.retain(nbytes)

    def reserve(self, operations: int, payload_bytes: int, nbytes: int, field: str) -> None:
        """Charge ``operations`` new pending operations holding ``nbytes`` (``payload_bytes``
        of them payload), all or nothing; LimitExceeded when they do not fit now, or
        InvalidArgument (naming ``field``) for a request that could never fit."""
        budget = self.budget
        budget.drain()
        limits = budget._limits
        if operations > limits.max_total_pending:
            raise InvalidArgument(
                field,
                f"{operations} new operations in one request can never fit: "
                f"max_total_pending is {limits.max_total_pending} (send smaller batches)",
            )
        if payload_bytes > limits.max_pending_payload_bytes:
            raise InvalidArgument(
                field,
                f"{payload_bytes} payload bytes in one request can never fit: "
                f"max_pending_payload_bytes is {limits.max_pending_payload_bytes}",
            )
        if nbytes > budget.share:
            raise InvalidArgument(
                field,
                f"{nbytes} bytes of new operations in one request can never fit: a "
                f"purgatory's share of the memory budget is {budget.share} bytes "
                "(send smaller batches)",
            )
        if budget.pending + operations > limits.max_total_pending:
            raise LimitExceeded(
                f"the server has {budget.pending} pending operations; "
                f"max_total_pending is {limits.max_total_pending}"
            )
        if budget.payload_bytes + payload_bytes > limits.max_pending_payload_bytes:
            raise LimitExceeded(
                f"pending operations hold {budget.payload_bytes} payload bytes; "
                f"max_pending_payload_bytes is {limits.max_pending_payload_bytes}"
            )
        self.check_room(nbytes)
        budget.pending += operations
        budget.payload_bytes += payload_bytes
        self.held += nbytes
        budget.held += nbytes

    def check_room(self, nbytes: int) -> None:
        """LimitExceeded unless ``nbytes`` more fit this purgatory's share and the server's
        held pool now (charges nothing)."""
        if not nbytes:  # nothing always fits
            return
        budget = self.budget
        if self.held + nbytes > budget.share:
            raise LimitExceeded(
                f"purgatory {self.name!r} holds {self.held} bytes; its share of the memory "
                f"budget is {budget.share} bytes (limits.purgatory_memory_percent)"
            )
        if budget.held + nbytes > budget.held_capacity:
            raise LimitExceeded(
                f"the server holds {budget.held} bytes for pending work; the memory budget "
                f"allows {budget.held_capacity} (limits.memory_budget_bytes)"
            )

    def restored(self, payload_bytes: int, nbytes: int) -> None:
        """Charge a recovered operation (never refused; see module docstring)."""
        budget = self.budget
        budget.pending += 1
        budget.payload_bytes += payload_bytes
        self.held += nbytes
        budget.held += nbytes

    def release_many(self, operations: int, payload_bytes: int, nbytes: int) -> None:
        """``operations`` operations holding ``nbytes`` stopped being pending."""
        if self.closed:  # close() released them
            return
        budget = self.budget
        budget.pending -= operations
        budget.payload_bytes -= payload_bytes
        self.held -= nbytes
        budget.held -= nbytes

    def charge(self, nbytes: int) -> None:
        """Charge ``nbytes`` that cannot be refused any more (a data link being made,
        checked beforehand by :meth:`check_room`); loop thread."""
        if self.closed:  # the purgatory is gone: nothing is charged to it any more
            return
        self.held += nbytes
        self.budget.held += nbytes

    def free_later(self, nbytes: int) -> None:
        """Release ``nbytes`` from any thread (applied on the loop by ``drain``)."""
        self.budget._freed.append((self, nbytes))

    def close(self, operations: int, payload_bytes: int) -> None:
        """The purgatory is gone (deleted or evicted) while it still had ``operations``
        pending ones (``payload_bytes`` of payload): release everything it holds."""
        budget = self.budget
        budget.drain()
        for holder in self.holders:
            budget.remove_holder(holder)
        budget.pending -= operations
        budget.payload_bytes -= payload_bytes
        budget.held -= self.held
        self.held = 0
        self.closed = True
