"""Worker groups, the no-I/O half: models and request builders shared by both clients.

A group member's stream yields :class:`Delivery` (sync) or :class:`AsyncDelivery`
(asyncio) events: an :class:`~purgatory_client.Event` plus the delivery's attempt number,
lease deadline and group, with ``ack()`` / ``nack()`` / ``extend()`` bound to the client
that received it. Semantics: docs/service.md "Worker groups".

A group's delivery selection (:class:`GroupSelection`: :class:`GroupPriority` rules, an
ordering key, a :class:`GroupRateLimit`) is given on the join that creates the group;
keys come from :class:`FirstKey` (the operation's first watched key) or
:class:`IdPrefix` (its id up to a separator). Semantics: docs/service.md "Priorities,
ordering keys and rate limits".
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client import _requests, _responses
from purgatory_client._models import Event

__all__ = [
    "AckEntry",
    "AckResult",
    "AsyncDelivery",
    "DeadLetterPage",
    "Delivery",
    "FirstKey",
    "GroupInfo",
    "GroupPriority",
    "GroupRateLimit",
    "GroupSelection",
    "IdPrefix",
    "NackResult",
    "RetryBackoff",
    "group_subscribe_request",
]

_BACKOFF_TYPES = {"fixed": 1, "exponential": 2}


@dataclass(frozen=True)
class RetryBackoff:
    """A group's retry backoff (BullMQ's ``backoff``): after the n-th delivery that ended
    unacked, the outcome waits ``delay_ms`` (``"fixed"``) or ``delay_ms * 2**(n-1)``
    (``"exponential"``), at most ``max_delay_ms`` (0: 12 h), the share ``jitter`` (0..1)
    of it drawn at random, before it is offered again."""

    type: str
    delay_ms: int
    max_delay_ms: int = 0
    jitter: float = 0.0


@dataclass(frozen=True)
class NackResult:
    """What a nack did: a dead letter now, or offered again at ``redeliver_at_ms``
    (server wall clock, epoch ms)."""

    dead_letter: bool
    redeliver_at_ms: int


@dataclass(frozen=True)
class AckEntry:
    """One entry of :meth:`ack_batch`: an ack, or with ``nack`` a nack (``delay_ms``
    None: the group's backoff; ``dead_letter``: a dead letter now)."""

    sequence: int
    attempt: int = 0
    nack: bool = False
    delay_ms: int | None = None
    dead_letter: bool = False


@dataclass(frozen=True)
class AckResult:
    """One entry's answer: ``code`` 0 (``ok``) or its gRPC status code (5 NOT_FOUND: not
    held; 9 FAILED_PRECONDITION: lease lost) with ``message``; a nack's outcome."""

    sequence: int
    code: int
    message: str
    dead_letter: bool
    redeliver_at_ms: int

    @property
    def ok(self) -> bool:
        return self.code == 0


@dataclass(frozen=True)
class FirstKey:
    """An outcome's key is the first key its operation watched (none: no key)."""


@dataclass(frozen=True)
class IdPrefix:
    """An outcome's key is its operation id up to ``separator`` (absent: no key)."""

    separator: str = "/"


KeySource = FirstKey | IdPrefix


@dataclass(frozen=True)
class GroupPriority:
    """Outcomes matching every non-empty field get ``priority`` (higher goes first)."""

    priority: int
    operation_id_prefix: str = ""
    key: str = ""


@dataclass(frozen=True)
class GroupRateLimit:
    """At most ``max`` deliveries in any ``window_ms``; per key when ``per_key`` is set."""

    max: int
    window_ms: int
    per_key: KeySource | None = None


@dataclass(frozen=True)
class GroupSelection:
    """Which ready outcome a group delivers next (fixed at the group's creation)."""

    priorities: tuple[GroupPriority, ...] = ()
    ordering_key: KeySource | None = None
    rate_limit: GroupRateLimit | None = None


def _source_to_proto(source: KeySource) -> Any:
    if isinstance(source, IdPrefix):
        return pb.GroupKeySource(operation_id_separator=source.separator)
    return pb.GroupKeySource(first_key=True)


def _source_from_proto(msg: Any) -> KeySource:
    if msg.WhichOneof("source") == "operation_id_separator":
        return IdPrefix(msg.operation_id_separator)
    return FirstKey()


def selection_to_proto(selection: GroupSelection) -> Any:
    msg = pb.GroupSelection(
        priorities=[
            pb.GroupPriority(
                priority=p.priority, operation_id_prefix=p.operation_id_prefix, key=p.key
            )
            for p in selection.priorities
        ]
    )
    if selection.ordering_key is not None:
        msg.ordering_key.CopyFrom(_source_to_proto(selection.ordering_key))
    rate = selection.rate_limit
    if rate is not None:
        msg.rate_limit.max = rate.max
        msg.rate_limit.window_ms = rate.window_ms
        if rate.per_key is not None:
            msg.rate_limit.per_key.CopyFrom(_source_to_proto(rate.per_key))
    return msg


def selection_from_proto(msg: Any) -> GroupSelection:
    rate = None
    if msg.HasField("rate_limit"):
        r = msg.rate_limit
        per_key = _source_from_proto(r.per_key) if r.HasField("per_key") else None
        rate = GroupRateLimit(r.max, r.window_ms, per_key)
    return GroupSelection(
        tuple(GroupPriority(p.priority, p.operation_id_prefix, p.key) for p in msg.priorities),
        _source_from_proto(msg.ordering_key) if msg.HasField("ordering_key") else None,
        rate,
    )


@dataclass(frozen=True)
class Delivery(Event):
    """An outcome leased to this member: ``ack()`` when done, ``extend()`` for more time.

    ``attempt`` is 1 on the first delivery and grows with each redelivery (an outcome
    may be delivered more than once: act idempotently). ``lease_deadline_ms`` (server
    wall clock, epoch ms) is when it goes to another member unless acked or extended.
    """

    attempt: int = 0
    lease_deadline_ms: int = 0
    group: str = ""
    # True for an entry of list_dead_letters (its attempt: the deliveries it got).
    dead_letter: bool = False
    # From a group with a selection: the outcome's priority and ordering key ("": none).
    priority: int = 0
    ordering_key: str = ""
    _ops: Any = field(default=None, repr=False, compare=False)

    def ack(self) -> None:
        """End the delivery; FailedPreconditionError if the lease was lost meanwhile."""
        self._ops.ack(self.group, self.sequence, attempt=self.attempt, purgatory=self.purgatory)

    def nack(self, delay_ms: int | None = None, *, dead_letter: bool = False) -> NackResult:
        """End the delivery unacked: offered again after ``delay_ms`` (None: the group's
        backoff, or at once), or a dead letter now (``dead_letter``)."""
        result: NackResult = self._ops.nack(
            self.group,
            self.sequence,
            attempt=self.attempt,
            delay_ms=delay_ms,
            dead_letter=dead_letter,
            purgatory=self.purgatory,
        )
        return result

    def extend(self, visibility_timeout_ms: int = 0) -> int:
        """Push the lease's deadline to now + ``visibility_timeout_ms`` (0: the group's);
        returns the new deadline (epoch ms)."""
        return int(
            self._ops.extend_lease(
                self.group,
                self.sequence,
                self.attempt,
                visibility_timeout_ms=visibility_timeout_ms,
                purgatory=self.purgatory,
            )
        )


@dataclass(frozen=True)
class AsyncDelivery(Event):
    """:class:`Delivery` for the asyncio client: ``await d.ack()``, ``await d.extend()``."""

    attempt: int = 0
    lease_deadline_ms: int = 0
    group: str = ""
    # True for an entry of list_dead_letters (its attempt: the deliveries it got).
    dead_letter: bool = False
    # From a group with a selection: the outcome's priority and ordering key ("": none).
    priority: int = 0
    ordering_key: str = ""
    _ops: Any = field(default=None, repr=False, compare=False)

    async def ack(self) -> None:
        await self._ops.ack(
            self.group, self.sequence, attempt=self.attempt, purgatory=self.purgatory
        )

    async def nack(self, delay_ms: int | None = None, *, dead_letter: bool = False) -> NackResult:
        result: Awaitable[NackResult] = self._ops.nack(
            self.group,
            self.sequence,
            attempt=self.attempt,
            delay_ms=delay_ms,
            dead_letter=dead_letter,
            purgatory=self.purgatory,
        )
        return await result

    async def extend(self, visibility_timeout_ms: int = 0) -> int:
        result: Awaitable[int] = self._ops.extend_lease(
            self.group,
            self.sequence,
            self.attempt,
            visibility_timeout_ms=visibility_timeout_ms,
            purgatory=self.purgatory,
        )
        return int(await result)


@dataclass(frozen=True)
class GroupInfo:
    name: str
    visibility_timeout_ms: int
    max_attempts: int
    ready: int
    leased: int
    dead_letters: int
    members: int
    last_sequence: int
    selection: GroupSelection | None = None
    # Outcomes waiting out a backoff or a nack's delay; the group's backoff (None: none).
    retrying: int = 0
    backoff: RetryBackoff | None = None


@dataclass(frozen=True)
class DeadLetterPage:
    """Dead letters (events whose ``attempt`` is the deliveries they got) and the
    ``next_after_sequence`` to pass for the next page (0: this was the last)."""

    dead_letters: tuple[Delivery | AsyncDelivery, ...]
    next_after_sequence: int


# The server's prefetch when a join gives none.
DEFAULT_PREFETCH = 16


def group_subscribe_request(
    purgatory: str,
    group: str,
    *,
    visibility_timeout_ms: int,
    max_attempts: int,
    prefetch: int,
    heartbeat_interval_ms: int,
    selection: GroupSelection | None = None,
    backoff: RetryBackoff | None = None,
) -> Any:
    req = pb.SubscribeRequest(
        purgatory=purgatory,
        group=_requests.name_field("group", group),
        visibility_timeout_ms=visibility_timeout_ms,
        max_attempts=max_attempts,
        prefetch=prefetch,
        heartbeat_interval_ms=heartbeat_interval_ms,
        selection=None if selection is None else selection_to_proto(selection),
        # Deliveries ready together come in one message (older servers: one each).
        max_batch=prefetch or DEFAULT_PREFETCH,
    )
    if backoff is not None:
        kind = _BACKOFF_TYPES.get(backoff.type)
        if kind is None:
            raise ValueError(f"backoff.type must be 'fixed' or 'exponential', not {backoff.type!r}")
        req.backoff.CopyFrom(
            pb.RetryBackoff(
                type=kind,  # type: ignore[arg-type]
                delay_ms=backoff.delay_ms,
                max_delay_ms=backoff.max_delay_ms,
                jitter=backoff.jitter,
            )
        )
    return req


def delivery_from_proto(msg: Any, ops: Any, cls: type[Delivery] | type[AsyncDelivery]) -> Any:
    event = _responses.event_from_proto(msg)
    return cls(
        **{f: getattr(event, f) for f in Event.__dataclass_fields__},
        attempt=msg.delivery_attempt,
        lease_deadline_ms=msg.lease_deadline_ms,
        group=msg.group,
        dead_letter=msg.dead_letter,
        priority=msg.priority,
        ordering_key=msg.ordering_key,
        _ops=ops,
    )


def group_from_proto(msg: Any) -> GroupInfo:
    return GroupInfo(
        name=msg.name,
        visibility_timeout_ms=msg.visibility_timeout_ms,
        max_attempts=msg.max_attempts,
        ready=msg.ready,
        leased=msg.leased,
        dead_letters=msg.dead_letters,
        members=msg.members,
        last_sequence=msg.last_sequence,
        selection=selection_from_proto(msg.selection) if msg.HasField("selection") else None,
        retrying=msg.retrying,
        backoff=_backoff_from_proto(msg.backoff) if msg.HasField("backoff") else None,
    )


def _backoff_from_proto(msg: Any) -> RetryBackoff:
    kind = {v: k for k, v in _BACKOFF_TYPES.items()}.get(msg.type, "unknown")
    return RetryBackoff(kind, msg.delay_ms, msg.max_delay_ms, msg.jitter)


def nack_request(
    purgatory: str,
    group: str,
    sequence: int,
    attempt: int,
    *,
    delay_ms: int | None,
    dead_letter: bool,
) -> Any:
    req = pb.NackRequest(
        purgatory=purgatory,
        group=_requests.name_field("group", group),
        sequence=sequence,
        attempt=attempt,
        dead_letter=dead_letter,
    )
    if delay_ms is not None:
        req.delay_ms = delay_ms
    return req


def nack_from_proto(msg: Any) -> NackResult:
    return NackResult(msg.dead_letter, msg.redeliver_at_ms)


def ack_batch_request(purgatory: str, group: str, entries: Iterable[AckEntry | int]) -> Any:
    """Entries are :class:`AckEntry` or bare sequences (an unfenced ack)."""
    req = pb.AckBatchRequest(purgatory=purgatory, group=_requests.name_field("group", group))
    for e in entries:
        entry = AckEntry(e) if isinstance(e, int) else e
        msg = req.entries.add(
            sequence=entry.sequence,
            attempt=entry.attempt,
            nack=entry.nack,
            dead_letter=entry.dead_letter,
        )
        if entry.delay_ms is not None:
            msg.delay_ms = entry.delay_ms
    return req


def ack_results_from_proto(msg: Any) -> list[AckResult]:
    return [
        AckResult(r.sequence, r.code, r.message, r.dead_letter, r.redeliver_at_ms)
        for r in msg.results
    ]


def ack_request(purgatory: str, group: str, sequence: int, attempt: int) -> Any:
    return pb.AckRequest(
        purgatory=purgatory,
        group=_requests.name_field("group", group),
        sequence=sequence,
        attempt=attempt,
    )


def extend_request(
    purgatory: str, group: str, sequence: int, attempt: int, visibility_timeout_ms: int
) -> Any:
    return pb.ExtendLeaseRequest(
        purgatory=purgatory,
        group=_requests.name_field("group", group),
        sequence=sequence,
        attempt=attempt,
        visibility_timeout_ms=visibility_timeout_ms,
    )


def dead_letters_request(purgatory: str, group: str, after_sequence: int, page_size: int) -> Any:
    return pb.ListDeadLettersRequest(
        purgatory=purgatory,
        group=_requests.name_field("group", group),
        after_sequence=after_sequence,
        page_size=page_size,
    )


def redrive_request(purgatory: str, group: str, sequences: Iterable[int] | None) -> Any:
    return pb.RedriveRequest(
        purgatory=purgatory, group=_requests.name_field("group", group), sequences=sequences or ()
    )


def discard_request(purgatory: str, group: str, sequences: Iterable[int] | None) -> Any:
    """``None``: every dead letter (``all``); otherwise those named (the server refuses an
    empty list, so a list that happens to be empty never discards everything)."""
    return pb.DiscardDeadLettersRequest(
        purgatory=purgatory,
        group=_requests.name_field("group", group),
        sequences=() if sequences is None else sequences,
        all=sequences is None,
    )


def list_groups_request(purgatory: str) -> Any:
    return pb.ListGroupsRequest(purgatory=purgatory)


def delete_group_request(purgatory: str, group: str) -> Any:
    return pb.DeleteGroupRequest(purgatory=purgatory, group=_requests.name_field("group", group))
