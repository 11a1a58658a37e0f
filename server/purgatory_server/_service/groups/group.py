"""A worker group: competing consumers of one purgatory's outcomes, with leases.

Every outcome the purgatory publishes after the group was created joins the group as a
READY entry (the group's cursor, ``last_sequence``, says how far it has taken them in).
``_dispatch`` leases READY entries, lowest sequence first, to connected members with room
(round robin), each lease a fresh attempt with a timer task on the purgatory's wheel. A
lease ends in one of four ways:

- ``ack``: the entry leaves the group (done);
- ``extend``: the same lease gets a new deadline;
- ``nack``: like an expiry, now, with the delay the member names (or the group's backoff),
  or DEAD at once when asked;
- expiry: READY again (redelivered to whichever member has room, the same one if alone),
  or WAITING out the group's backoff (:mod:`.backoff`) first, or DEAD once it has had
  ``max_attempts`` deliveries. Dead letters stay until redriven
  (READY with a fresh budget of ``max_attempts`` deliveries), or discarded (``discard``,
  or an ack): they leave the group like an acked entry.

A WAITING entry holds a timer task in ``lease`` like a leased one and becomes READY when
it fires; a group without backoff whose members never nack never has one.

Fencing: every lease is a new attempt number, strictly above every earlier one of the same
outcome, redrives included (:mod:`.entry`); an ack or extension naming an older attempt is
FailedPrecondition.

A member that disconnects keeps its leases until they expire (it may still ack over a
unary call); nothing is redelivered early. Delivery is therefore at-least-once: a member
that acts and dies before acking has its outcome acted on again.

A group created with a :class:`~.selection.Selection` (priorities, ordering keys, a rate
limit) keeps its ready entries in a :class:`~.selector.Selector` instead of ``_ready``,
which picks the next one to lease; a group without one never touches it. Every entry that
becomes READY (intake, a lapsed lease, the end of a wait, a redrive, a restore) goes
through ``_make_ready``; every one owed no more (acked, dead-lettered) is told to the
selector (``settled``). A WAITING entry is neither: it keeps its ordering key in flight,
so the key's next outcome waits behind it until it is redelivered and acked or
dead-lettered. A rate-limited group whose window is full arms a wake-up on the wheel (a
``LeaseTask`` of sequence 0, which no outcome has) for when the window has room again;
every lease, a redelivery after a wait included, counts against the window.

Invariants: an entry is in ``_entries`` from intake to ack; it is LEASED or WAITING iff
``lease`` is set; every READY entry's sequence is in ``_ready`` (a heap) or, for a group
with a selection, in its selector (stale items, of entries acked, leased or nacked since,
are skipped when popped); ``len(_entries)`` is what the backlog limit counts.

Thread safety: loop-confined. Lease expiries arrive from the timer thread through the
group set's inbox and are applied here on the loop thread.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from functools import partial
from typing import Protocol

from purgatory_server._engine.time import Time
from purgatory_server._engine.timer import Timer
from purgatory_server._service.groups.batch import BatchEntry, BatchResult
from purgatory_server._service.groups.entry import EntryState, GroupEntry
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.lease import LeaseTask
from purgatory_server._service.groups.member import Delivery, GroupMember
from purgatory_server._service.groups.selector import Selector
from purgatory_server._service.model.errors import FailedPrecondition, NotFound, ServiceError
from purgatory_server._service.model.outcome import Outcome

__all__ = ["GroupJournal", "WorkerGroup"]


class GroupJournal(Protocol):
    """Where a durable group's changes are recorded (see :mod:`.records`)."""

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
        """Record a lease; call ``then`` once the record is written (never if it fails).
        ``delivered_ms`` (non-zero for a rate-limited group): when, for the rate window."""
        ...

    def extended(self, group: str, sequence: int, attempt: int, deadline_ms: int) -> None: ...

    def acked(self, group: str, sequences: list[int]) -> None: ...

    def dead_lettered(self, group: str, sequences: list[int]) -> None: ...

    def redriven(self, group: str, sequences: list[int]) -> None: ...

    def retried(self, group: str, sequence: int, attempt: int, retry_at_ms: int) -> None:
        """The delivery ``attempt`` ended unacked; offered again at ``retry_at_ms``."""
        ...


class WorkerGroup:
    """One named group of one purgatory (loop-confined; see module docstring)."""

    def __init__(
        self,
        name: str,
        config: GroupConfig,
        last_sequence: int,
        *,
        timer: Timer,
        clock: Time,
        expired: Callable[[LeaseTask], None],
        journal: GroupJournal | None = None,
        max_rate_keys: int = 100_000,
    ) -> None:
        self.name = name
        self.config = config
        self.last_sequence = last_sequence
        self._timer = timer
        self._clock = clock
        self._expired = expired
        self._journal = journal
        self._entries: dict[int, GroupEntry] = {}
        self._ready: list[int] = []
        self.members: list[GroupMember] = []
        self._turn = 0
        selection = config.selection
        self._selector = None if selection is None else Selector(selection, max_rate_keys)
        self._wake: LeaseTask | None = None
        self._wake_at = 0
        # Backoff jitter, made on first use (a group without a jittered backoff has none).
        self._rng: random.Random | None = None

    # ------------------------------------------------------------------ counters
    def __len__(self) -> int:
        return len(self._entries)

    def tally(self) -> dict[EntryState, int]:
        """Entries in each state; O(entries), for listing only."""
        tally = dict.fromkeys(EntryState, 0)
        # A copy (GIL-atomic): the metrics exporter calls this from its own thread
        # while the loop may add or remove entries.
        for entry in list(self._entries.values()):
            tally[entry.state] += 1
        return tally

    def counts(self) -> tuple[int, int, int]:
        """(ready, leased, dead) entries (waiting ones: :meth:`tally`); O(entries)."""
        tally = self.tally()
        return tally[EntryState.READY], tally[EntryState.LEASED], tally[EntryState.DEAD]

    # ------------------------------------------------------------------ intake
    def offer(self, outcome: Outcome) -> None:
        """Take a newly published outcome in (those at or below the cursor are old)."""
        if outcome.sequence <= self.last_sequence:
            return
        self.last_sequence = outcome.sequence
        entry = self._entries[outcome.sequence] = GroupEntry(outcome)
        if self._selector is None:  # inline: the plain group's per-outcome path
            heapq.heappush(self._ready, outcome.sequence)
        else:
            self._selector.ready(entry, self._entries)
        self._dispatch()

    def _make_ready(self, entry: GroupEntry) -> None:
        selector = self._selector
        if selector is None:
            heapq.heappush(self._ready, entry.sequence)
        else:
            selector.ready(entry, self._entries)

    def restore(
        self,
        entries: Iterable[GroupEntry],
        rate_windows: Iterable[tuple[str, Iterable[int]]] = (),
    ) -> None:
        """Entries recovered from the journal (start-up), with their attempts so far.

        A lease whose recorded deadline is still ahead (on this server's wall clock)
        stays: the entry is LEASED, held by nobody connected, until that deadline, so
        its holder's ack or extension (same attempt) still counts after the restart and
        nobody else gets the outcome meanwhile. An entry whose recorded wait
        (``retry_at_ms``) is still ahead is WAITING until then; so is one whose lease
        lapsed unrecorded (the server was down) in a group with backoff, until the lease's
        deadline plus the backoff without jitter. Every other entry not dead is READY.
        Leased and waiting entries are restored first, so their ordering keys stay in
        flight. ``rate_windows``: the recorded delivery times of a rate-limited group, per
        key."""
        now = self._clock.wall_clock_ms()
        backoff = self.config.backoff
        selector = self._selector
        if selector is not None and selector.limiter is not None:
            selector.limiter.restore(rate_windows, now)
        entries = sorted(entries, key=lambda e: e.sequence)  # leases first, per key
        for entry in entries:
            self._entries[entry.sequence] = entry
            if entry.state is EntryState.DEAD:
                continue
            left = entry.lease_deadline_ms - now
            if left > 0:
                entry.state = EntryState.LEASED
                task = LeaseTask(left, self.name, entry.sequence, self._expired)
                entry.lease = task
                self._timer.add(task)
                if selector is not None:
                    selector.leased_restored(entry)
                continue
            retry_at = entry.retry_at_ms
            if not retry_at and entry.lease_deadline_ms and backoff is not None:
                retry_at = entry.lease_deadline_ms + backoff.longest_ms(entry.failures())
            entry.lease_deadline_ms = 0
            if retry_at > now:
                self._wait(entry, retry_at - now, retry_at)
                if selector is not None:
                    selector.leased_restored(entry)
        for entry in entries:
            if entry.state is not EntryState.DEAD and entry.lease is None:
                entry.state = EntryState.READY
                entry.retry_at_ms = 0
                self._make_ready(entry)

    # ------------------------------------------------------------------ members
    def join(self, member: GroupMember) -> None:
        self.members.append(member)
        self._dispatch()

    def leave(self, member: GroupMember) -> None:
        """The member's stream ended; its leases run out on their own (see docstring)."""
        if member in self.members:
            self.members.remove(member)
        for seq in member.leases:
            entry = self._entries.get(seq)
            if entry is not None and entry.holder is member:
                entry.holder = None
        member.leases.clear()

    def close(self, error: ServiceError) -> None:
        """End every member's stream and cancel every lease (purgatory or group gone)."""
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        for member in self.members:
            member.close(error)
        self.members.clear()
        for entry in self._entries.values():
            entry.drop_lease()

    def _next_member(self) -> GroupMember | None:
        members = self.members
        for _ in range(len(members)):
            self._turn = (self._turn + 1) % len(members)
            member = members[self._turn]
            if member.room > 0:
                return member
        return None

    def _dispatch(self) -> None:
        """Lease READY entries, lowest sequence first, while some member has room."""
        if self._selector is not None:
            self._dispatch_selected(self._selector)
            return
        ready = self._ready
        entries = self._entries
        while ready and self.members:
            member = self._next_member()
            if member is None:
                return
            entry = entries.get(heapq.heappop(ready))
            if entry is None or entry.state is not EntryState.READY:
                continue  # acked while waiting
            self._lease(entry, member)

    def _dispatch_selected(self, selector: Selector) -> None:
        """Lease what the selector picks while some member has room; a full rate
        window arms the wake-up."""
        entries = self._entries
        now = self._clock.wall_clock_ms()
        while self.members:
            member = self._next_member()
            if member is None:
                break
            picked = selector.next(entries, now)
            if picked is None:
                break
            entry, priority = picked
            rate_key = selector.leased(entry, now)
            self._lease(
                entry,
                member,
                priority=priority,
                ordering_key=selector.ordering_key(entry) or "",
                now=now,
                rate_key=rate_key if selector.limiter is not None else None,
            )
        if selector.limiter is None:
            return
        at = selector.wake_at(now)
        if not at or (self._wake is not None and self._wake_at <= at):
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake = task = LeaseTask(max(1, at - now), self.name, 0, self._expired)
        self._wake_at = at
        self._timer.add(task)

    def _woken(self, task: LeaseTask) -> None:
        """The rate window has room again (the wake-up armed by a full one)."""
        if task is not self._wake or self._selector is None:
            return
        self._wake = None
        self._selector.unpark(self._clock.wall_clock_ms())
        self._dispatch()

    def _lease(
        self,
        entry: GroupEntry,
        member: GroupMember,
        *,
        priority: int = 0,
        ordering_key: str = "",
        now: int = 0,
        rate_key: str | None = None,
    ) -> None:
        """``now``: the wall clock the selector judged at (0: read it), so the lease
        starts when the rate window counts it; ``rate_key`` set: a rate-limited
        group's delivery, journaled with its time."""
        timeout = self.config.visibility_timeout_ms
        entry.attempts += 1
        entry.retry_at_ms = 0
        entry.state = EntryState.LEASED
        entry.holder = member
        now = now or self._clock.wall_clock_ms()
        deadline = now + timeout
        entry.lease_deadline_ms = deadline
        task = LeaseTask(timeout, self.name, entry.sequence, self._expired)
        entry.lease = task
        self._timer.add(task)
        delivery = Delivery(
            entry.outcome, self.name, entry.attempts, deadline, priority, ordering_key
        )
        journal = self._journal
        if journal is None:
            member.push(delivery)
            return
        # Fencing across a crash: the member sees an attempt number only once it is
        # journaled, so a restart can never hand the same number out again. Meanwhile
        # the lease counts against the member's prefetch; if the write fails the lease
        # simply runs out and the outcome is offered again.
        member.leases.add(entry.sequence)
        journal.delivered(
            self.name,
            entry.sequence,
            entry.attempts,
            deadline,
            partial(self._send, entry, task, member, delivery),
            delivered_ms=0 if rate_key is None else now,
            rate_key=rate_key or "",
        )

    @staticmethod
    def _send(entry: GroupEntry, task: LeaseTask, member: GroupMember, delivery: Delivery) -> None:
        """Hand a journaled delivery to its member, unless its lease ended meanwhile
        (expired, or acked by an operator) or the member left."""
        if entry.lease is task and entry.holder is member:
            member.push(delivery)

    # ------------------------------------------------------------------ lease ends
    def _entry(self, sequence: int) -> GroupEntry:
        entry = self._entries.get(sequence)
        if entry is None:
            raise NotFound(
                f"group {self.name!r} holds no outcome with sequence {sequence} "
                "(never taken in, or acked already)",
                "outcome",
                str(sequence),
            )
        return entry

    def _fenced(self, sequence: int, attempt: int, what: str) -> GroupEntry:
        """The entry, if ``attempt`` (0: any) is its latest delivery (fencing)."""
        entry = self._entry(sequence)
        if attempt and attempt != entry.attempts:
            raise FailedPrecondition(
                f"lease lost: outcome {sequence} of group {self.name!r} was delivered again "
                f"(attempt {entry.attempts}, this {what} is for attempt {attempt})"
            )
        return entry

    def _remove(self, sequence: int, attempt: int) -> None:
        entry = self._fenced(sequence, attempt, "ack")
        entry.drop_lease()
        del self._entries[sequence]
        if self._selector is not None:
            self._selector.settled(entry, self._entries)

    def ack(self, sequence: int, attempt: int) -> None:
        """The entry leaves the group. ``attempt`` 0 acks any delivery; otherwise it must
        be the entry's latest (a member whose lease expired and whose outcome went out
        again lost it: FailedPrecondition). A late ack of the latest attempt whose lease
        expired but that was not redelivered yet still counts: the work was done."""
        self._remove(sequence, attempt)
        if self._journal is not None:
            self._journal.acked(self.name, [sequence])
        self._dispatch()

    def nack(self, sequence: int, attempt: int, delay_ms: int | None, dead_letter: bool) -> int:
        """End the delivery unacked; when the outcome is offered again (wall epoch ms), 0
        if it is a dead letter now. Fenced like :meth:`ack`.

        ``dead_letter``, or a spent budget (as at expiry): DEAD. Otherwise offered again
        after ``delay_ms`` (``None``: the group's backoff, none: at once). A late nack of
        the latest attempt (its lease lapsed, not yet redelivered) sets the wait anew. A
        dead letter stays one: answered 0, nothing changes (Redrive revives it)."""
        at = self._nack(sequence, attempt, delay_ms, dead_letter)
        self._dispatch()
        return at

    def _nack(self, sequence: int, attempt: int, delay_ms: int | None, dead_letter: bool) -> int:
        entry = self._fenced(sequence, attempt, "nack")
        if entry.state is EntryState.DEAD:
            return 0
        entry.drop_lease()
        entry.lease_deadline_ms = 0
        if dead_letter or entry.budget_spent(self.config.max_attempts):
            self._bury(entry)
            return 0
        if delay_ms is None:
            delay_ms = self._backoff_ms(entry)
        return self._retry(entry, delay_ms)

    def settle(self, batch: list[BatchEntry]) -> list[BatchResult]:
        """Acks and nacks applied in order, each answered alone (never all or nothing):
        an entry that fails (NotFound, FailedPrecondition) changes nothing, the others
        take effect. The acks are journaled as one record."""
        results: list[BatchResult] = []
        acked: list[int] = []
        for item in batch:
            try:
                if item.nack:
                    at = self._nack(item.sequence, item.attempt, item.delay_ms, item.dead_letter)
                    results.append(BatchResult(item.sequence, dead_letter=not at, retry_at_ms=at))
                else:
                    self._remove(item.sequence, item.attempt)
                    acked.append(item.sequence)
                    results.append(BatchResult(item.sequence))
            except (NotFound, FailedPrecondition) as error:
                results.append(BatchResult(item.sequence, int(error.code), error.message))
        if acked and self._journal is not None:
            self._journal.acked(self.name, acked)
        self._dispatch()
        return results

    def _backoff_ms(self, entry: GroupEntry) -> int:
        backoff = self.config.backoff
        if backoff is None or not entry.attempts:
            return 0
        if not backoff.jitter:
            return backoff.longest_ms(entry.failures())
        if self._rng is None:
            self._rng = random.Random()
        return backoff.wait_ms(entry.failures(), self._rng)

    def _retry(self, entry: GroupEntry, delay_ms: int) -> int:
        """Offer a lease-less entry again after ``delay_ms`` (journaled); when."""
        now = self._clock.wall_clock_ms()
        at = now + delay_ms
        if delay_ms > 0:
            self._wait(entry, delay_ms, at)
        else:
            entry.state = EntryState.READY
            entry.retry_at_ms = 0
            self._make_ready(entry)
        if self._journal is not None:
            self._journal.retried(self.name, entry.sequence, entry.attempts, at)
        return at

    def _wait(self, entry: GroupEntry, delay_ms: int, at: int) -> None:
        entry.state = EntryState.WAITING
        entry.retry_at_ms = at
        task = LeaseTask(delay_ms, self.name, entry.sequence, self._expired)
        entry.lease = task
        self._timer.add(task)

    def _bury(self, entry: GroupEntry) -> None:
        entry.state = EntryState.DEAD
        entry.retry_at_ms = 0
        if self._selector is not None:
            self._selector.settled(entry, self._entries)
        if self._journal is not None:
            self._journal.dead_lettered(self.name, [entry.sequence])

    def extend(self, sequence: int, attempt: int, timeout_ms: int) -> int:
        """A new deadline for a lease still held; returns it (wall epoch ms)."""
        entry = self._entry(sequence)
        if entry.state is not EntryState.LEASED or attempt != entry.attempts:
            raise FailedPrecondition(
                f"lease lost: outcome {sequence} of group {self.name!r} is not leased as "
                f"attempt {attempt} any more (state {entry.state.value}, attempt "
                f"{entry.attempts})"
            )
        timeout = timeout_ms or self.config.visibility_timeout_ms
        old = entry.lease
        if old is not None:
            old.cancel()
        task = LeaseTask(timeout, self.name, sequence, self._expired)
        entry.lease = task
        entry.lease_deadline_ms = self._clock.wall_clock_ms() + timeout
        self._timer.add(task)
        if self._journal is not None:  # a restart keeps the extended lease (restore)
            self._journal.extended(self.name, sequence, attempt, entry.lease_deadline_ms)
        return entry.lease_deadline_ms

    def expire(self, task: LeaseTask) -> None:
        """A timer fired (loop thread): a lease lapsed (redeliver, wait out the backoff,
        or dead-letter at the limit), a wait ended (READY), or a rate-limited group's
        window has room again (sequence 0)."""
        if task.sequence == 0:
            self._woken(task)
            return
        entry = self._entries.get(task.sequence)
        if entry is None or entry.lease is not task:
            return  # acked, extended, nacked or redelivered meanwhile
        entry.lease = None
        if entry.state is EntryState.WAITING:
            entry.state = EntryState.READY
            entry.retry_at_ms = 0
            self._make_ready(entry)
            self._dispatch()
            return
        entry.drop_lease()
        if entry.budget_spent(self.config.max_attempts):
            self._bury(entry)
        elif self.config.backoff is not None:
            entry.lease_deadline_ms = 0
            self._retry(entry, self._backoff_ms(entry))
        else:
            entry.state = EntryState.READY
            self._make_ready(entry)
        self._dispatch()

    # ------------------------------------------------------------------ dead letters
    def dead_letters(self, after_sequence: int, limit: int) -> tuple[list[GroupEntry], int]:
        """Dead entries after ``after_sequence`` in sequence order, at most ``limit``;
        and the sequence to continue after (0: no more). O(entries log entries)."""
        dead = sorted(
            s for s, e in self._entries.items() if e.state is EntryState.DEAD and s > after_sequence
        )
        page = [self._entries[s] for s in dead[:limit]]
        more = len(dead) > limit
        return page, (page[-1].sequence if more else 0)

    def redrive(self, sequences: Iterable[int] | None) -> list[int]:
        """Dead letters back to READY with a fresh budget (``None``: all); which were.
        Their attempt numbers go on from where they were (fencing, see :mod:`.entry`)."""
        chosen = self._dead(sequences)
        for s in chosen:
            entry = self._entries[s]
            entry.state = EntryState.READY
            entry.redriven_at = entry.attempts
            self._make_ready(entry)
        if chosen and self._journal is not None:
            self._journal.redriven(self.name, chosen)
        self._dispatch()
        return chosen

    def discard(self, sequences: Iterable[int] | None) -> list[int]:
        """Dead letters out of the group for good (``None``: all); which were. Journaled
        as acks: on replay, as here, the entry is gone (never delivered again)."""
        chosen = self._dead(sequences)
        for s in chosen:
            del self._entries[s]  # a dead entry holds no lease and is not in ``_ready``
        if chosen and self._journal is not None:
            self._journal.acked(self.name, chosen)
        return chosen

    def _dead(self, sequences: Iterable[int] | None) -> list[int]:
        """The dead letters among ``sequences`` (``None``: all), once each, in the order
        given (all: sequence order)."""
        if sequences is None:
            return sorted(s for s, e in self._entries.items() if e.state is EntryState.DEAD)
        chosen: list[int] = []
        for s in sequences:
            entry = self._entries.get(s)
            if entry is not None and entry.state is EntryState.DEAD and s not in chosen:
                chosen.append(s)
        return chosen

    def entries(self) -> list[GroupEntry]:
        """Every entry in sequence order (a compaction carry, tests)."""
        return [self._entries[s] for s in sorted(self._entries)]
