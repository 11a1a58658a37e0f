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

Trailing metadata carries machine-readable details where a client must act on them:

- ``purgatory-resume-after``: the sequence a dropped subscriber should resume after;
- ``purgatory-oldest-sequence``: the oldest sequence still retained (OUT_OF_RANGE);
- ``purgatory-incarnation``: the stream's current incarnation (FAILED_PRECONDITION of a
  Subscribe that named another one: the stream was reset).
"""

from __future__ import annotations

import enum

from purgatory_server._service.core.quoting import quote

__all__ = [
    "METADATA_INCARNATION",
    "METADATA_OLDEST",
    "METADATA_RESUME_AFTER",
    "AlreadyExists",
    "Code",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "LimitExceeded",
    "NotFound",
    "OutOfRange",
    "OutcomeNotRecorded",
    "PermissionDenied",
    "ServiceError",
    "ShuttingDown",
    "SlowSubscriber",
    "StreamReset",
    "Unauthenticated",
]

METADATA_RESUME_AFTER = "purgatory-resume-after"
METADATA_OLDEST = "purgatory-oldest-sequence"
METADATA_INCARNATION = "purgatory-incarnation"


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
