"""Service errors and their gRPC status codes: the ONE place the status policy lives.

The service layer raises these plain exceptions; the edge turns each into a status with
:func:`status_for`. Clients map the codes back to their own exception tree
(``purgatory_client.errors``). The policy (docs/service.md "Errors"):

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

Every status carries a ``google.rpc.Status`` in ``grpc-status-details-bin`` (built with
grpcio-status): ``BadRequest`` field violations for INVALID_ARGUMENT, ``RetryInfo`` (a
suggested delay) for RESOURCE_EXHAUSTED and UNAVAILABLE, ``ResourceInfo`` for NOT_FOUND.

Trailing metadata carries machine-readable details where a client must act on them:

- ``purgatory-resume-after``: the sequence a dropped subscriber should resume after;
- ``purgatory-oldest-sequence``: the oldest sequence still retained (OUT_OF_RANGE);
- ``purgatory-incarnation``: the stream's current incarnation (FAILED_PRECONDITION of a
  Subscribe that named another one: the stream was reset).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from purgatory_server._service.logs import log_rejected
from purgatory_server._service.quoting import quote

__all__ = [
    "METADATA_INCARNATION",
    "METADATA_OLDEST",
    "METADATA_RESUME_AFTER",
    "AlreadyExists",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "LimitExceeded",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ServiceError",
    "ShuttingDown",
    "SlowSubscriber",
    "StreamReset",
    "Unauthenticated",
    "abort",
    "status_for",
    "stream_errors",
    "unary_errors",
]

R = TypeVar("R")

METADATA_RESUME_AFTER = "purgatory-resume-after"
METADATA_OLDEST = "purgatory-oldest-sequence"
METADATA_INCARNATION = "purgatory-incarnation"


class ServiceError(Exception):
    """Base of every error the service reports to a caller as a status."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def error_details(self) -> tuple[Message, ...]:
        """The google.rpc error-detail messages of this status (none by default)."""
        return ()


def _retry_info(delay_s: float) -> Message:
    seconds = int(delay_s)
    info: Message = error_details_pb2.RetryInfo(
        retry_delay=Duration(seconds=seconds, nanos=int((delay_s - seconds) * 1e9))
    )
    return info


class NotFound(ServiceError):
    """An unknown purgatory or operation (``resource_type`` "purgatory" or "operation")."""

    code = grpc.StatusCode.NOT_FOUND

    def __init__(self, message: str, resource_type: str = "", resource_name: str = "") -> None:
        super().__init__(message)
        self.resource_type = resource_type
        self.resource_name = resource_name[:100]

    def error_details(self) -> tuple[Message, ...]:
        return (
            error_details_pb2.ResourceInfo(
                resource_type=self.resource_type,
                resource_name=self.resource_name,
                description=self.message,
            ),
        )


class InvalidArgument(ServiceError):
    """A malformed request; ``field`` names the offending request field."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem

    def error_details(self) -> tuple[Message, ...]:
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=self.field, description=self.problem
        )
        return (error_details_pb2.BadRequest(field_violations=[violation]),)


class AlreadyExists(ServiceError):
    """A name or operation id already used with a different definition."""

    code = grpc.StatusCode.ALREADY_EXISTS


class LimitExceeded(ServiceError):
    """Capacity that frees up is used up: pending operations, subscribers, purgatories,
    server-wide budgets. Never a property of the request alone (that is
    :class:`InvalidArgument`), so a client that backs off and retries can succeed.
    ``retry_after_s`` is the suggested delay sent as RetryInfo."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    retry_after_s = 1.0

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field

    def error_details(self) -> tuple[Message, ...]:
        return (_retry_info(self.retry_after_s),)


class SlowSubscriber(ServiceError):
    """A subscriber fell further behind than its buffer; it must resume after a sequence."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, resume_after: int, buffer: int) -> None:
        super().__init__(
            f"subscriber fell more than {buffer} events behind; "
            f"resume with after_sequence={resume_after}"
        )
        self.resume_after = resume_after

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_RESUME_AFTER, str(self.resume_after)),)

    def error_details(self) -> tuple[Message, ...]:
        return (_retry_info(0.0),)  # resuming at once is right: the buffer is empty now


class OutOfRange(ServiceError):
    """``after_sequence`` asks for events no longer retained (or not yet issued)."""

    code = grpc.StatusCode.OUT_OF_RANGE

    def __init__(self, message: str, oldest: int) -> None:
        super().__init__(message)
        self.oldest = oldest

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_OLDEST, str(self.oldest)),)


class FailedPrecondition(ServiceError):
    """The server's state does not allow the request (not the request's content)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


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

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(ServiceError):
    """A valid token without the permission the RPC needs on that purgatory."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Internal(ServiceError):
    """A bug: the edge logged it with its traceback; the caller sees only this."""

    code = grpc.StatusCode.INTERNAL

    def __init__(self, message: str = "internal error (logged by the server)") -> None:
        super().__init__(message)


class ShuttingDown(ServiceError):
    """The server is stopping; retry against another instance or later."""

    code = grpc.StatusCode.UNAVAILABLE

    def __init__(self, message: str = "server is shutting down") -> None:
        super().__init__(message)

    def error_details(self) -> tuple[Message, ...]:
        return (_retry_info(1.0),)


Metadata = tuple[tuple[str, str | bytes], ...]


def status_for(exc: ServiceError) -> tuple[grpc.StatusCode, str, Metadata]:
    """The (code, message, trailing metadata) a servicer aborts with for ``exc``.

    The trailing metadata holds ``exc``'s own entries and ``grpc-status-details-bin``
    (a ``google.rpc.Status`` with the same code and message and ``exc``'s details).
    """
    status = status_pb2.Status(code=exc.code.value[0], message=exc.message)
    for detail in exc.error_details():
        status.details.add().Pack(detail)
    rich = rpc_status.to_status(status)
    return exc.code, exc.message, (*exc.trailing_metadata(), *rich.trailing_metadata)


async def abort(context: Any, exc: ServiceError) -> None:
    """End the call with ``exc``'s status (raises grpc's AbortError to unwind)."""
    code, message, metadata = status_for(exc)
    log_rejected(code.name, message)
    await context.abort(code, message, metadata)


def unary_errors(
    fn: Callable[[Any, Any, Any], Awaitable[R]],
) -> Callable[[Any, Any, Any], Awaitable[R]]:
    """Decorate a unary servicer method: ServiceError -> its status, via status_for."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Any) -> R:
        try:
            return await fn(self, request, context)
        except ServiceError as exc:
            await abort(context, exc)
            raise AssertionError("context.abort returned") from exc  # pragma: no cover

    return wrapper


def stream_errors(
    fn: Callable[[Any, Any, Any], AsyncIterator[R]],
) -> Callable[[Any, Any, Any], AsyncIterator[R]]:
    """Decorate a server-streaming servicer method the same way."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Any) -> AsyncIterator[R]:
        try:
            async for item in fn(self, request, context):
                yield item
        except ServiceError as exc:
            await abort(context, exc)

    return wrapper
