"""Service errors: plain exceptions, each naming the status code it stands for.

The core raises these and knows nothing of gRPC; the edge (:mod:`.status_mapping`) turns each
into a gRPC status with its details. Clients map the codes back to their own exception
tree (``purgatory_client.errors``). The policy (docs/service.md "Errors"):

- INVALID_ARGUMENT (:class:`InvalidArgument`): anything invalid whatever the load, field
  ranges, lengths, counts, sizes, batch sizes, configs, undecodable messages; the
  message starts with the field;
- RESOURCE_EXHAUSTED (:class:`LimitExceeded`, :class:`SlowSubscriber`): only capacity
  that frees up (pending operations, subscribers, purgatories, server-wide budgets), so
  backing off and retrying is right;
- NOT_FOUND, ALREADY_EXISTS, OUT_OF_RANGE, FAILED_PRECONDITION, UNAVAILABLE,
  UNAUTHENTICATED, PERMISSION_DENIED as their names say; INTERNAL only for a bug (the
  edge logs it once with its traceback). Never UNKNOWN.

Messages quote caller-supplied values through :func:`~.quoting.quote` (at most ~100
characters), so a status always fits in the trailers a client accepts.

What a status carries beyond its code and message is plain data here: the offending
``field`` (INVALID_ARGUMENT), the resource (NOT_FOUND), ``retry_after_s`` (a suggested
delay), and trailing metadata; :mod:`.status_mapping` encodes them as ``google.rpc`` details.

Tree::

    ServiceError
    ├── InvalidArgument      INVALID_ARGUMENT
    ├── NotFound             NOT_FOUND
    ├── AlreadyExists        ALREADY_EXISTS
    ├── LimitExceeded        RESOURCE_EXHAUSTED (retry after 1 s)
    ├── SlowSubscriber       RESOURCE_EXHAUSTED (resume at once)
    ├── OutOfRange           OUT_OF_RANGE
    ├── FailedPrecondition   FAILED_PRECONDITION
    │   └── StreamReset
    ├── Unauthenticated      UNAUTHENTICATED
    ├── PermissionDenied     PERMISSION_DENIED
    ├── Internal             INTERNAL
    ├── ShuttingDown         UNAVAILABLE (retry after 1 s)
    └── OutcomeNotRecorded   UNAVAILABLE (retry after 1 s)

and the errors of particular parts, each under the code it stands for::

    NotFound
    └── PurgatoryDeleted       a replicated purgatory deleted cluster-wide
    LimitExceeded
    ├── Overloaded             a bulk request while the loop runs late
    ├── SessionOverflow        a Session whose client stopped reading
    └── JournalFull            a write to a durable purgatory whose disk is full
    FailedPrecondition
    └── RecreateRefused        re-creating a deleted replicated purgatory
    ServiceError (UNAVAILABLE)
    ├── NotOwner               another server owns the purgatory (route in metadata)
    ├── DeleteNotRecorded      a replicated deletion whose tombstone was not written
    ├── SiblingUnavailable     a worker did not answer the whole-server listing
    ├── SessionJournalFailed   a Session's journal write failed
    └── PurgatoryNotOpen       a durable purgatory start-up could not open (retried)
    SessionEnded               the error that ended a Session, with what it delivered

Trailing metadata carries machine-readable details where a client must act on them:

- ``purgatory-resume-after``: the sequence a dropped subscriber should resume after;
- ``purgatory-oldest-sequence``: the oldest sequence still retained (OUT_OF_RANGE);
- ``purgatory-incarnation``: the stream's current incarnation (FAILED_PRECONDITION of a
  Subscribe that named another one: the stream was reset);
- ``purgatory-owner``, ``purgatory-owner-epoch``: the owner of a purgatory served
  elsewhere (:class:`NotOwner`);
- ``purgatory-session-buffer``, ``purgatory-session-delivered``: a Session's bound and
  the number of the last outcome it wrote.
"""

from __future__ import annotations

import enum

from purgatory_server._service.model.quoting import quote

__all__ = [
    "METADATA_INCARNATION",
    "METADATA_OLDEST",
    "METADATA_OWNER",
    "METADATA_OWNER_EPOCH",
    "METADATA_RESUME_AFTER",
    "METADATA_SESSION_BUFFER",
    "METADATA_SESSION_DELIVERED",
    "AlreadyExists",
    "Code",
    "DeleteNotRecorded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "JournalFull",
    "LimitExceeded",
    "NotFound",
    "NotOwner",
    "OutOfRange",
    "OutcomeNotRecorded",
    "Overloaded",
    "PermissionDenied",
    "PurgatoryDeleted",
    "PurgatoryNotOpen",
    "RecreateRefused",
    "ServiceError",
    "SessionEnded",
    "SessionJournalFailed",
    "SessionOverflow",
    "ShuttingDown",
    "SiblingUnavailable",
    "SlowSubscriber",
    "StreamReset",
    "Unauthenticated",
]

METADATA_RESUME_AFTER = "purgatory-resume-after"
METADATA_OLDEST = "purgatory-oldest-sequence"
METADATA_INCARNATION = "purgatory-incarnation"
METADATA_OWNER = "purgatory-owner"
METADATA_OWNER_EPOCH = "purgatory-owner-epoch"
METADATA_SESSION_BUFFER = "purgatory-session-buffer"
METADATA_SESSION_DELIVERED = "purgatory-session-delivered"


class Code(enum.IntEnum):
    """The status codes of the API, numbered as gRPC (and google.rpc.Code) number them."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class ServiceError(Exception):
    """Base of every error the service reports to a caller as a status."""

    code: Code = Code.INTERNAL
    # A suggested delay before retrying (sent as RetryInfo); None: no suggestion.
    retry_after_s: float | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()


class NotFound(ServiceError):
    """An unknown purgatory or operation (``resource_type`` "purgatory" or "operation")."""

    code = Code.NOT_FOUND

    def __init__(self, message: str, resource_type: str = "", resource_name: str = "") -> None:
        super().__init__(message)
        self.resource_type = resource_type
        self.resource_name = resource_name[:100]


class InvalidArgument(ServiceError):
    """A malformed request; ``field`` names the offending request field."""

    code = Code.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class AlreadyExists(ServiceError):
    """A name or operation id already used with a different definition."""

    code = Code.ALREADY_EXISTS


class LimitExceeded(ServiceError):
    """Capacity that frees up is used up: pending operations, subscribers, purgatories,
    server-wide budgets. Never a property of the request alone (that is
    :class:`InvalidArgument`), so a client that backs off and retries can succeed.
    ``retry_after_s`` is the suggested delay sent as RetryInfo."""

    code = Code.RESOURCE_EXHAUSTED
    retry_after_s = 1.0

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class SlowSubscriber(ServiceError):
    """A subscriber fell further behind than its buffer (events or bytes); its buffer was
    dropped and it must resume after the last sequence it was sent."""

    code = Code.RESOURCE_EXHAUSTED
    retry_after_s = 0.0  # resuming at once is right: the buffer is empty now

    def __init__(self, resume_after: int, buffer: int, buffer_bytes: int | None = None) -> None:
        bound = (
            f"{buffer} events"
            if buffer_bytes is None
            else (f"{buffer} events or {buffer_bytes} bytes")
        )
        super().__init__(
            f"subscriber fell more than {bound} behind; resume with after_sequence={resume_after}"
        )
        self.resume_after = resume_after

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_RESUME_AFTER, str(self.resume_after)),)


class OutOfRange(ServiceError):
    """``after_sequence`` asks for events no longer retained (or not yet issued)."""

    code = Code.OUT_OF_RANGE

    def __init__(self, message: str, oldest: int) -> None:
        super().__init__(message)
        self.oldest = oldest

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_OLDEST, str(self.oldest)),)


class FailedPrecondition(ServiceError):
    """The server's state does not allow the request (not the request's content)."""

    code = Code.FAILED_PRECONDITION


class StreamReset(FailedPrecondition):
    """A resume named another incarnation of the event stream: its sequences are not
    this stream's, so the subscriber must decide how to start over."""

    def __init__(self, requested: str, current: str) -> None:
        super().__init__(
            f"incarnation: the event stream was reset (asked for {quote(requested)}, "
            f"current is {current!r}); sequences of the old stream do not apply"
        )
        self.field = "incarnation"
        self.current = current

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_INCARNATION, self.current),)


class Unauthenticated(ServiceError):
    """No valid token (authentication is on); the message never repeats the token."""

    code = Code.UNAUTHENTICATED


class PermissionDenied(ServiceError):
    """A valid token without the permission the RPC needs on that purgatory."""

    code = Code.PERMISSION_DENIED


class Internal(ServiceError):
    """A bug: the edge logged it with its traceback; the caller sees only this."""

    code = Code.INTERNAL

    def __init__(self, message: str = "internal error (logged by the server)") -> None:
        super().__init__(message)


class ShuttingDown(ServiceError):
    """The server is stopping; retry against another instance or later."""

    code = Code.UNAVAILABLE
    retry_after_s = 1.0

    def __init__(self, message: str = "server is shutting down") -> None:
        super().__init__(message)


class OutcomeNotRecorded(ServiceError):
    """The journal write holding an operation's outcome failed, so nobody may see that
    outcome (a restart or the purgatory's next owner may not know it): the calls waiting
    for it end with this instead of waiting for ever. Re-send the request (to the new
    owner, if the purgatory moved): the operation's id makes that safe."""

    code = Code.UNAVAILABLE
    retry_after_s = 1.0

    def __init__(self, purgatory: str, operation_id: str, cause: BaseException) -> None:
        super().__init__(
            f"purgatory {purgatory!r} could not journal the outcome of operation "
            f"{quote(operation_id)} ({cause}); re-send the request"
        )


class PurgatoryDeleted(NotFound):
    """A request for a replicated purgatory that was deleted cluster-wide."""

    def __init__(self, name: str) -> None:
        super().__init__(f"purgatory {name!r} was deleted", "purgatory", name)


class RecreateRefused(FailedPrecondition):
    """CreatePurgatory of a deleted replicated name (see the module docstring)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"replicated purgatory {name!r} was deleted and stays deleted cluster-wide; "
            "revive it first (python -m purgatory_server._cluster.tombstone revive)"
        )


class DeleteNotRecorded(ServiceError):
    """The tombstone could not be written: this owner gives the purgatory up (the next
    owner rebuilds it, its operations cancelled); DeletePurgatory may be re-sent."""

    code = Code.UNAVAILABLE

    def __init__(self, name: str) -> None:
        super().__init__(f"deletion of purgatory {name!r} was not recorded; retry")


class NotOwner(ServiceError):
    """This server does not serve ``purgatory``; ``owner`` (if known) does."""

    code = Code.UNAVAILABLE

    def __init__(self, purgatory: str, owner: str = "", epoch: int = 0) -> None:
        where = f"; its owner is {owner}" if owner else "; a new owner is being chosen"
        super().__init__(f"purgatory {purgatory!r} is not served by this server{where}")
        self.purgatory = purgatory
        self.owner = owner
        self.epoch = epoch
        # RetryInfo (status.py): at once when the owner is known, after a short wait while
        # a takeover is under way.
        self.retry_after_s = 0.0 if owner else 0.2

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        if not self.owner:
            return ()
        return ((METADATA_OWNER, self.owner), (METADATA_OWNER_EPOCH, str(self.epoch)))


class SessionOverflow(LimitExceeded):
    """What waits to be sent passed the stream's hard bound and the client has read
    nothing for a while."""

    def __init__(self, bound: int, stalled_s: float) -> None:
        super().__init__(
            f"session has more than {bound} bytes of outcomes and acknowledgements "
            f"waiting and read nothing for {stalled_s:g} s (the client is not reading); "
            "resume it (session_id, resume_after) "
            "or re-open it and re-send the watches still wanted"
        )
        self.bound = bound

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_SESSION_BUFFER, str(self.bound)),)


class SessionOverBudget(LimitExceeded):
    """The server's held pool stayed full while the stream held ``held`` bytes owed to a
    client that has read nothing for a while (what it owes is never refused: a stream
    past the budget is paused, then cut)."""

    def __init__(self, held: int, stalled_s: float) -> None:
        super().__init__(
            f"session holds {held} bytes of outcomes and acknowledgements while the "
            f"server's memory budget is full, and read nothing for {stalled_s:g} s (the "
            "client is not reading); resume it (session_id, resume_after) "
            "or re-open it and re-send the watches still wanted"
        )
        self.held = held

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_SESSION_BUFFER, str(self.held)),)


class SessionEnded(ServiceError):
    """The error that ended a stream, with the number of the last outcome written."""

    def __init__(self, cause: ServiceError, delivered: int) -> None:
        super().__init__(cause.message)
        self.code = cause.code
        self.retry_after_s = cause.retry_after_s
        self._metadata = (*cause.trailing_metadata(), (METADATA_SESSION_DELIVERED, str(delivered)))

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


class SessionJournalFailed(ServiceError):
    """A journal write a Session waited on failed: its watches must be sent again."""

    code = Code.UNAVAILABLE

    def __init__(self) -> None:
        super().__init__("journal write failed; re-send the watches on a new session")


class SiblingUnavailable(ServiceError):
    """A sibling worker did not answer (restarting): retry shortly."""

    code = Code.UNAVAILABLE
    retry_after_s = 0.5


class Overloaded(LimitExceeded):
    """A bulk request refused while the event loop runs late; retry after the delay."""

    def __init__(self, field: str, lag_s: float, bulk_entries: int) -> None:
        super().__init__(
            f"the server is overloaded (its event loop runs {lag_s * 1000:.0f} ms late): "
            f"requests of {bulk_entries} or more entries are refused until it catches up",
            field,
        )
        self.retry_after_s = round(max(0.1, 2 * lag_s), 3)


class JournalFull(LimitExceeded):
    """A write to a durable purgatory whose journal is out of space: refused before it
    changed anything, so retrying after the suggested delay is safe. Reads go on."""

    def __init__(self, purgatory: str, why: str) -> None:
        super().__init__(
            f"purgatory {purgatory!r} takes no writes while its journal is out of space "
            f"({why[:100]}); reads are served; retry once space is freed"
        )


class PurgatoryNotOpen(ServiceError):
    """A durable purgatory the server could not open at start-up (its data directory
    failed: full, read-only, ...); the server retries and serves it once it opens
    (``retry_after_s`` None: a retry found its journal damaged, no more attempts)."""

    code = Code.UNAVAILABLE

    def __init__(self, purgatory: str, why: str, retry_after_s: float | None) -> None:
        then = (
            "it needs the operator (the server's log says why)"
            if retry_after_s is None
            else f"the server tries again within {retry_after_s:.1f} s"
        )
        super().__init__(f"purgatory {purgatory!r} is not open yet: {why[:200]}; {then}")
        self.retry_after_s = retry_after_s
