"""The worker groups of one purgatory: creation on first join, limits, lease expiries.

:class:`GroupSet` is what a :class:`~purgatory_server._service.core.named_purgatory.NamedPurgatory`
holds: it creates a group on its first join (checking ``max_groups``), hands each
published outcome to every group, refuses new registrations while a group holds
``max_group_backlog`` outcomes (capacity that frees up as members ack), and applies lease
expiries that the timer thread puts in its :class:`~purgatory_server._service.outcomes.inbox.Inbox`.

Why groups do not read the retained event window: a group must not lose an outcome that
rolled out of it while its members were away, so it keeps its own reference to every
outcome it holds, bounded by ``max_group_backlog``.

Thread safety: loop-confined, except ``_inbox.put`` (any thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._engine.time import Time
from purgatory_server._engine.timer import Timer
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.groups.backoff import RetryBackoff
from purgatory_server._service.groups.group import WorkerGroup
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.lease import LeaseTask
from purgatory_server._service.groups.member import GroupMember
from purgatory_server._service.groups.records import AfterWrite, GroupRecords, RestoredGroup
from purgatory_server._service.groups.selection import Selection
from purgatory_server._service.model.errors import (
    FailedPrecondition,
    LimitExceeded,
    NotFound,
    ServiceError,
)
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.model.quoting import quote
from purgatory_server._service.outcomes.inbox import Inbox

__all__ = ["GroupSet"]


class Sequenced(Protocol):
    """The purgatory's outcome log: a new group starts after its last sequence."""

    @property
    def last_sequence(self) -> int: ...


class GroupSet:
    """Every worker group of one purgatory (loop-confined; see module docstring)."""

    def __init__(
        self,
        purgatory: str,
        limits: Limits,
        loop: asyncio.AbstractEventLoop,
        *,
        timer: Timer,
        clock: Time,
        log: Sequenced,
        write: Callable[[JournalRecord], None] | None = None,
        after_write: AfterWrite | None = None,
    ) -> None:
        self._purgatory = purgatory
        self._limits = limits
        self._timer = timer
        self._clock = clock
        # The last sequence handed out: where a new group starts (see records.created).
        self._log = log
        self._records = GroupRecords(purgatory, write, after_write) if write is not None else None
        self._groups: dict[str, WorkerGroup] = {}
        self._inbox: Inbox[LeaseTask] = Inbox(loop, self._expire)

    def __bool__(self) -> bool:
        return bool(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    # ------------------------------------------------------------------ groups
    def _new(self, name: str, config: GroupConfig, last_sequence: int) -> WorkerGroup:
        group = WorkerGroup(
            name,
            config,
            last_sequence,
            timer=self._timer,
            clock=self._clock,
            expired=self._inbox.put,
            journal=self._records,
            max_rate_keys=self._limits.max_group_backlog,
        )
        self._groups[name] = group
        return group

    def get(self, name: str) -> WorkerGroup:
        group = self._groups.get(name)
        if group is None:
            raise NotFound(
                f"group {quote(name)} not found in purgatory {self._purgatory!r}", "group", name
            )
        return group

    def all(self) -> list[WorkerGroup]:
        return [self._groups[name] for name in sorted(self._groups)]

    def join(
        self,
        name: str,
        visibility_timeout_ms: int,
        max_attempts: int,
        prefetch: int,
        *,
        selection: Selection | None = None,
        backoff: RetryBackoff | None = None,
    ) -> tuple[WorkerGroup, GroupMember]:
        """A new member of group ``name``, creating the group (zero settings: defaults).

        An existing group keeps its settings: a non-zero setting that differs from them
        is FailedPrecondition (the caller expects a group that is not there); so is a
        ``selection`` or a ``backoff`` that differs from the group's (None: the group's).
        Members of all groups together are bounded by ``max_subscribers`` (counted apart
        from the purgatory's broadcast subscribers).
        """
        members = sum(len(g.members) for g in self._groups.values())
        if members >= self._limits.max_subscribers:
            raise LimitExceeded(
                f"purgatory {self._purgatory!r} has {members} worker group members; "
                f"max_subscribers is {self._limits.max_subscribers}"
            )
        group = self._groups.get(name)
        if group is None:
            if len(self._groups) >= self._limits.max_groups:
                raise LimitExceeded(
                    f"purgatory {self._purgatory!r} has {len(self._groups)} worker groups; "
                    f"max_groups is {self._limits.max_groups} (delete one with DeleteGroup)"
                )
            defaults = GroupConfig()
            config = GroupConfig(
                visibility_timeout_ms or defaults.visibility_timeout_ms,
                max_attempts or defaults.max_attempts,
                selection=selection,
                backoff=backoff,
            )
            group = self._new(name, config, self._log.last_sequence)
            if self._records is not None:
                self._records.created(name, config, group.last_sequence)
        else:
            config = group.config
            if (
                visibility_timeout_ms and visibility_timeout_ms != config.visibility_timeout_ms
            ) or (max_attempts and max_attempts != config.max_attempts):
                raise FailedPrecondition(
                    f"group {quote(name)} exists with visibility_timeout_ms "
                    f"{config.visibility_timeout_ms} and max_attempts {config.max_attempts}; "
                    "pass 0 to use them, or delete the group to change them"
                )
            if selection is not None and selection != config.selection:
                raise FailedPrecondition(
                    f"group {quote(name)} exists with another selection (priorities, "
                    "ordering key, rate limit); leave it unset to use the group's, or "
                    "delete the group to change it"
                )
            if backoff is not None and backoff != config.backoff:
                raise FailedPrecondition(
                    f"group {quote(name)} exists with backoff {config.backoff}; "
                    "leave backoff unset to use it, or delete the group to change it"
                )
        member = GroupMember(prefetch)
        group.join(member)
        return group, member

    def delete(self, name: str, error: ServiceError) -> int:
        """Remove a group; its members' streams end with ``error``. Outcomes dropped."""
        group = self.get(name)
        del self._groups[name]
        group.close(error)
        if self._records is not None:
            self._records.deleted(name)
        return len(group)

    def restore(self, groups: dict[str, RestoredGroup]) -> None:
        """Groups recovered from the journal (start-up, before serving)."""
        for name, restored in groups.items():
            group = self._new(name, restored.config, restored.last_sequence)
            group.restore(restored.entries, restored.rate_windows)

    # ------------------------------------------------------------------ outcomes
    def offer(self, outcome: Outcome) -> None:
        """A published outcome, for every group (the purgatory's publish path)."""
        for group in self._groups.values():
            group.offer(outcome)

    def check_capacity(self) -> None:
        """LimitExceeded while some group holds max_group_backlog outcomes (register)."""
        limit = self._limits.max_group_backlog
        for group in self._groups.values():
            if len(group) >= limit:
                raise LimitExceeded(
                    f"worker group {group.name!r} of purgatory {self._purgatory!r} holds "
                    f"{len(group)} unacked outcomes; max_group_backlog is {limit}"
                )

    # ------------------------------------------------------------------ leases
    def _expire(self, tasks: list[LeaseTask]) -> None:
        for task in tasks:
            group = self._groups.get(task.group)
            if group is not None:
                group.expire(task)

    def drain(self) -> None:
        """Apply lease expiries already fired (MockTime tests, after advance_clock)."""
        self._inbox.drain()

    def close(self, error: ServiceError) -> None:
        for group in self._groups.values():
            group.close(error)
