"""Why a console request is refused, as an HTTP status and a message for the page.

A failed RPC keeps its meaning: PERMISSION_DENIED is 403, UNAUTHENTICATED 401,
NOT_FOUND 404, INVALID_ARGUMENT 400, FAILED_PRECONDITION 409, RESOURCE_EXHAUSTED 429,
UNAVAILABLE 503; :class:`BadInput` (a form or query field the console itself cannot
read) is 400 and :class:`Forbidden` (no session, or a CSRF token missing or wrong) 403.
"""

from __future__ import annotations

from http import HTTPStatus

from purgatory_client.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PurgatoryError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)

__all__ = ["BadInput", "Forbidden", "status_of"]


class BadInput(ValueError):
    """A field the console cannot read; the message names it."""


class Forbidden(Exception):
    """Refused before any RPC: a cross-site or stale form."""


_STATUS: tuple[tuple[type[PurgatoryError], HTTPStatus], ...] = (
    (PermissionDeniedError, HTTPStatus.FORBIDDEN),
    (UnauthenticatedError, HTTPStatus.UNAUTHORIZED),
    (NotFoundError, HTTPStatus.NOT_FOUND),
    (InvalidArgumentError, HTTPStatus.BAD_REQUEST),
    (OutOfRangeError, HTTPStatus.BAD_REQUEST),
    (FailedPreconditionError, HTTPStatus.CONFLICT),
    (ResourceExhaustedError, HTTPStatus.TOO_MANY_REQUESTS),
    (UnavailableError, HTTPStatus.SERVICE_UNAVAILABLE),
)


def status_of(exc: PurgatoryError) -> HTTPStatus:
    """The HTTP status of a failed RPC (502 for one with no closer meaning)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return HTTPStatus.BAD_GATEWAY
