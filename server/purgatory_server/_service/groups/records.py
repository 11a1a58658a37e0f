"""Worker-group changes as journal records (``JournalRecord`` fields 8-10).

The one place that spells a group on disk (docs/journal.md "Worker groups"): creation and
deletion as ``GroupState``, each lease as ``GroupDelivered`` (so attempt counts survive a
restart and a poison outcome cannot loop forever across crashes), acks, dead-lettering
and redrives as ``GroupSettled`` (a discarded dead letter is an ack: it leaves the group);
lease extensions as ``GroupDelivered`` again (same
attempt, new deadline); a nack, or a lapsed lease's backoff, as ``GroupRetry`` (the wait's
end). After a restart a lease whose deadline is still ahead runs to it
(its holder may still ack), every other entry that is not dead is ready again
(at-least-once), its attempt numbers going on from the last one recorded (fencing: a
number is never handed out twice; that is why a delivery is sent only once its
``GroupDelivered`` record is written, ``delivered(then=)``). A group's selection
(:mod:`.selection`) is spelled in its ``GroupState``; a rate-limited group's deliveries
carry their time and rate key, from which replay rebuilds the rate window.

Thread safety: loop-confined (called by the groups, on the purgatory's loop).
"""

from __future__ import annotations

from collections.abc import Callable

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._service.groups.backoff import BackoffType, RetryBackoff
from purgatory_server._service.groups.entry import GroupEntry
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.selection import selection_to_proto

__all__ = ["GroupRecords", "RestoredGroup", "backoff_from_state"]

Settled = JournalRecord.GroupSettled
AfterWrite = Callable[[Callable[[], None], Callable[[BaseException], None]], None]


def _unwritten(_: BaseException) -> None:
    """A lease record that failed to write: its delivery is never sent; the lease runs
    out and the outcome is offered again (the journal's failure is reported elsewhere)."""


class GroupRecords:
    """Implements :class:`~.group.GroupJournal` over a record sink."""

    __slots__ = ("_after_write", "_purgatory", "_write")

    def __init__(
        self,
        purgatory: str,
        write: Callable[[JournalRecord], None],
        after_write: AfterWrite | None = None,
    ) -> None:
        self._purgatory = purgatory
        self._write = write
        # The journal's after_write (``core.journal_hooks``); None: written at once.
        self._after_write = after_write

    def created(self, group: str, config: GroupConfig, last_sequence: int) -> None:
        state = JournalRecord.GroupState(
            purgatory=self._purgatory,
            group=group,
            visibility_timeout_ms=config.visibility_timeout_ms,
            max_attempts=config.max_attempts,
            last_sequence=last_sequence,
        )
        selection = config.selection
        if selection is not None:
            state.selection = selection_to_proto(selection).SerializeToString()
            if selection.rate_limit is not None:
                state.rate_window_ms = selection.rate_limit.window_ms
        backoff = config.backoff
        if backoff is not None:
            state.backoff_type = int(backoff.type)
            state.backoff_delay_ms = backoff.delay_ms
            state.backoff_max_delay_ms = backoff.max_delay_ms
            state.backoff_jitter = backoff.jitter
        self._write(JournalRecord(group_state=state))

    def deleted(self, group: str) -> None:
        self._write(
            JournalRecord(
                group_state=JournalRecord.GroupState(
                    purgatory=self._purgatory, group=group, deleted=True
                )
            )
        )

    def delivered(
        self,
        group: str,
        sequence: int,
        attempt: int,
        deadline_ms: int,
        then: Callable[[], None],
        *,
        delivered_ms: int = 0,
        rate_key: str = "",
    ) -> None:
        self._write(
            JournalRecord(
                group_delivered=JournalRecord.GroupDelivered(
                    purgatory=self._purgatory,
                    group=group,
                    sequence=sequence,
                    attempt=attempt,
                    lease_deadline_wall_ms=deadline_ms,
                    delivered_wall_ms=delivered_ms,
                    rate_key=rate_key,
                )
            )
        )
        if self._after_write is None:
            then()
        else:
            self._after_write(then, _unwritten)

    def extended(self, group: str, sequence: int, attempt: int, deadline_ms: int) -> None:
        """The same lease, a new deadline: the same record (replay keeps the latest)."""
        self._write(
            JournalRecord(
                group_delivered=JournalRecord.GroupDelivered(
                    purgatory=self._purgatory,
                    group=group,
                    sequence=sequence,
                    attempt=attempt,
                    lease_deadline_wall_ms=deadline_ms,
                )
            )
        )

    def _settled(self, group: str, sequences: list[int], disposition: int) -> None:
        self._write(
            JournalRecord(
                group_settled=Settled(
                    purgatory=self._purgatory,
                    group=group,
                    sequences=sequences,
                    disposition=disposition,  # type: ignore[arg-type]
                )
            )
        )

    def acked(self, group: str, sequences: list[int]) -> None:
        self._settled(group, sequences, Settled.DISPOSITION_ACKED)

    def dead_lettered(self, group: str, sequences: list[int]) -> None:
        self._settled(group, sequences, Settled.DISPOSITION_DEAD_LETTERED)

    def redriven(self, group: str, sequences: list[int]) -> None:
        self._settled(group, sequences, Settled.DISPOSITION_REDRIVEN)

    def retried(self, group: str, sequence: int, attempt: int, retry_at_ms: int) -> None:
        self._write(
            JournalRecord(
                group_retry=JournalRecord.GroupRetry(
                    purgatory=self._purgatory,
                    group=group,
                    sequence=sequence,
                    attempt=attempt,
                    retry_at_wall_ms=retry_at_ms,
                )
            )
        )


def backoff_from_state(state: JournalRecord.GroupState) -> RetryBackoff | None:
    """The backoff a ``GroupState`` record spells (type 0: none)."""
    if not state.backoff_type:
        return None
    return RetryBackoff(
        BackoffType(state.backoff_type),
        state.backoff_delay_ms,
        state.backoff_max_delay_ms,
        state.backoff_jitter,
    )


class RestoredGroup:
    """A group as the journal left it, decoded for the service."""

    __slots__ = ("config", "entries", "last_sequence", "rate_windows")

    def __init__(
        self,
        config: GroupConfig,
        last_sequence: int,
        entries: list[GroupEntry],
        rate_windows: list[tuple[str, list[int]]] | None = None,
    ):
        self.config = config
        self.last_sequence = last_sequence
        self.entries = entries
        # A rate-limited group's recorded delivery times, per rate key.
        self.rate_windows = rate_windows or []
