"""Service errors and their gRPC status codes: the ONE place the mapping lives.

The service layer raises these plain exceptions (no gRPC import needed to raise or test
them); the servicer turns each into a status with :func:`status_for`. Clients map the
codes back to their own exception tree (``purgatory_client.errors``).

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

from purgatory_server._service.quoting import quote

__all__ = [
    "METADATA_INCARNATION",
    "METADATA_OLDEST",
    "METADATA_RESUME_AFTER",
    "AlreadyExists",
    "FailedPrecondition",
    "InvalidArgument",
    "LimitExceeded",
    "NotFound",
    "OutOfRange",
    "ServiceError",
    "ShuttingDown",
    "SlowSubscriber",
    "StreamReset",
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


class NotFound(ServiceError):
    """An unknown purgatory or operation."""

    code = grpc.StatusCode.NOT_FOUND


class InvalidArgument(ServiceError):
    """A malformed request; ``field`` names the offending request field."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class AlreadyExists(ServiceError):
    """A name or operation id already used with a different definition."""

    code = grpc.StatusCode.ALREADY_EXISTS


class LimitExceeded(ServiceError):
    """A configured limit is exceeded: a request's size (keys, lengths, bytes, timeout
    range, batch size) or a capacity (pending operations, subscribers, purgatories).
    ``field`` names the request field when one is to blame."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


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


class ShuttingDown(ServiceError):
    """The server is stopping; retry against another instance or later."""

    code = grpc.StatusCode.UNAVAILABLE

    def __init__(self, message: str = "server is shutting down") -> None:
        super().__init__(message)


def status_for(exc: ServiceError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, str], ...]]:
    """The (code, message, trailing metadata) a servicer aborts with for ``exc``."""
    return exc.code, exc.message, exc.trailing_metadata()


async def _abort(context: Any, exc: ServiceError) -> None:
    code, message, metadata = status_for(exc)
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
            await _abort(context, exc)
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
            await _abort(context, exc)

    return wrapper
