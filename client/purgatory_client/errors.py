"""The client's exception tree, mapped one-to-one from gRPC status codes.

::

    PurgatoryError                      any failed call (.code, .details, .metadata)
    ├── InvalidArgumentError            INVALID_ARGUMENT   malformed request (names the field)
    ├── NotFoundError                   NOT_FOUND          unknown purgatory or operation
    ├── AlreadyExistsError              ALREADY_EXISTS     name or id taken (other definition)
    ├── ResourceExhaustedError          RESOURCE_EXHAUSTED a configured limit was hit
    │   └── SlowSubscriberError         ... a subscriber fell behind (.resume_after)
    ├── OutOfRangeError                 OUT_OF_RANGE       events no longer retained
    │                                                      (.oldest_sequence)
    ├── UnavailableError                UNAVAILABLE        server down or shutting down
    ├── DeadlineExceededError           DEADLINE_EXCEEDED  the call's deadline passed
    ├── CancelledError                  CANCELLED          the call was cancelled
    └── ServerError                     anything else (INTERNAL, UNKNOWN, ...)

Both clients raise only these (never a raw ``grpc.RpcError``), so callers catch one tree
whether they use the sync or the async client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import grpc

__all__ = [
    "AlreadyExistsError",
    "CancelledError",
    "DeadlineExceededError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PurgatoryError",
    "ResourceExhaustedError",
    "ServerError",
    "SlowSubscriberError",
    "UnavailableError",
    "error_for_code",
    "from_rpc_error",
]

RESUME_AFTER = "purgatory-resume-after"
OLDEST_SEQUENCE = "purgatory-oldest-sequence"


class PurgatoryError(Exception):
    """A call failed with a gRPC status other than OK."""

    def __init__(
        self, code: grpc.StatusCode, details: str, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.metadata: Mapping[str, str] = dict(metadata or {})


class InvalidArgumentError(PurgatoryError):
    pass


class NotFoundError(PurgatoryError):
    pass


class AlreadyExistsError(PurgatoryError):
    pass


class ResourceExhaustedError(PurgatoryError):
    pass


class SlowSubscriberError(ResourceExhaustedError):
    """The server ended a subscription that fell behind; resume after ``resume_after``."""

    @property
    def resume_after(self) -> int:
        return int(self.metadata[RESUME_AFTER])


class OutOfRangeError(PurgatoryError):
    @property
    def oldest_sequence(self) -> int | None:
        raw = self.metadata.get(OLDEST_SEQUENCE)
        return int(raw) if raw is not None else None


class UnavailableError(PurgatoryError):
    pass


class DeadlineExceededError(PurgatoryError):
    pass


class CancelledError(PurgatoryError):
    pass


class ServerError(PurgatoryError):
    pass


_BY_CODE: dict[grpc.StatusCode, type[PurgatoryError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.CANCELLED: CancelledError,
}


def _pairs(metadata: Any) -> Iterable[tuple[str, str]]:
    if not metadata:
        return ()
    return ((str(k), v if isinstance(v, str) else v.decode()) for k, v in metadata)


def from_rpc_error(exc: grpc.RpcError) -> PurgatoryError:
    """The PurgatoryError for a failed sync or aio call."""
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or ""
    metadata = dict(_pairs(exc.trailing_metadata()))
    cls = _BY_CODE.get(code, ServerError)
    if cls is ResourceExhaustedError and RESUME_AFTER in metadata:
        cls = SlowSubscriberError
    return cls(code, details, metadata)


def error_for_code(
    code: grpc.StatusCode, details: str, metadata: Mapping[str, str] | None = None
) -> PurgatoryError:
    """The PurgatoryError for a status carried in a message (a Session acknowledgement)."""
    return _BY_CODE.get(code, ServerError)(code, details, metadata)
