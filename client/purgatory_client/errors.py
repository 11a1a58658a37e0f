"""The client's exception tree, mapped one-to-one from gRPC status codes.

::

    PurgatoryError                      any failed call (.code, .details, .metadata)
    ├── InvalidArgumentError            INVALID_ARGUMENT   malformed request (names the field)
    ├── NotFoundError                   NOT_FOUND          unknown purgatory or operation
    ├── AlreadyExistsError              ALREADY_EXISTS     name or id taken (other definition)
    ├── ResourceExhaustedError          RESOURCE_EXHAUSTED capacity used up: back off, retry
    │   └── SlowSubscriberError         ... a subscriber fell behind (.resume_after)
    ├── OutOfRangeError                 OUT_OF_RANGE       events no longer retained
    │                                                      (.oldest_sequence)
    ├── FailedPreconditionError         FAILED_PRECONDITION server state forbids it
    │   └── StreamResetError            ... a resumed subscription's stream was reset
    │                                       (.incarnation: the new stream's id)
    ├── UnauthenticatedError            UNAUTHENTICATED    no valid token
    ├── PermissionDeniedError           PERMISSION_DENIED  the token lacks a permission
    ├── UnavailableError                UNAVAILABLE        server down or shutting down
    ├── DeadlineExceededError           DEADLINE_EXCEEDED  the call's deadline passed
    ├── CancelledError                  CANCELLED          the call was cancelled
    └── ServerError                     anything else (INTERNAL, UNKNOWN, ...)

Both clients raise only these (never a raw ``grpc.RpcError``), so callers catch one tree
whether they use the sync or the async client.

Machine-readable details: the server sends a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer (gRPC's richer error model). Every error exposes it
decoded: ``.field_violations`` (``BadRequest``: ``(field, description)`` pairs, for
INVALID_ARGUMENT), ``.retry_delay`` (``RetryInfo``, seconds, for RESOURCE_EXHAUSTED and
UNAVAILABLE), ``.resource_info`` (``ResourceInfo``: ``(type, name)``, for NOT_FOUND) and
``.status_details`` (every detail message as sent). The clients also raise
``InvalidArgumentError`` themselves, before sending, for arguments they can tell are
wrong (a ``str`` where a list of keys is expected, a negative timeout); those have
``code`` INVALID_ARGUMENT and a field violation like the server's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "AlreadyExistsError",
    "CancelledError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "PurgatoryError",
    "ResourceExhaustedError",
    "ServerError",
    "SlowSubscriberError",
    "StreamResetError",
    "UnauthenticatedError",
    "UnavailableError",
    "error_for_code",
    "from_rpc_error",
    "invalid_argument",
]

RESUME_AFTER = "purgatory-resume-after"
OLDEST_SEQUENCE = "purgatory-oldest-sequence"
INCARNATION = "purgatory-incarnation"


DETAILS_KEY = "grpc-status-details-bin"
_DETAIL_TYPES: tuple[Any, ...] = (
    error_details_pb2.BadRequest,
    error_details_pb2.RetryInfo,
    error_details_pb2.ResourceInfo,
    error_details_pb2.ErrorInfo,
    error_details_pb2.QuotaFailure,
    error_details_pb2.PreconditionFailure,
)


class PurgatoryError(Exception):
    """A call failed with a gRPC status other than OK."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        metadata: Mapping[str, str] | None = None,
        status_details: tuple[Message, ...] = (),
        hint: str = "",
    ) -> None:
        super().__init__(f"{code.name}: {details}{hint}")
        self.code = code
        self.details = details
        # What to try when the status's own words do not say (" (...)" or "").
        self.hint = hint
        self.metadata: Mapping[str, str] = dict(metadata or {})
        self.status_details = status_details

    @property
    def field_violations(self) -> tuple[tuple[str, str], ...]:
        """``(field, description)`` of each BadRequest field violation."""
        return tuple(
            (v.field, v.description)
            for d in self.status_details
            if isinstance(d, error_details_pb2.BadRequest)
            for v in d.field_violations
        )

    @property
    def retry_delay(self) -> float | None:
        """The server's suggested delay before retrying (RetryInfo), in seconds."""
        for d in self.status_details:
            if isinstance(d, error_details_pb2.RetryInfo):
                return float(d.retry_delay.seconds + d.retry_delay.nanos / 1e9)
        return None

    @property
    def resource_info(self) -> tuple[str, str] | None:
        """``(resource_type, resource_name)`` of a NOT_FOUND (ResourceInfo)."""
        for d in self.status_details:
            if isinstance(d, error_details_pb2.ResourceInfo):
                return (d.resource_type, d.resource_name)
        return None


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


class FailedPreconditionError(PurgatoryError):
    pass


class StreamResetError(FailedPreconditionError):
    """The purgatory's event stream was reset (an in-memory purgatory whose server
    restarted, or one deleted and created again): the sequences a subscription was
    resuming from belong to the old stream, so resuming would silently skip or repeat
    events. ``incarnation`` is the new stream's id; subscribe again (from now on, or
    from ``after_sequence=0`` to replay what the new stream retains) and reconcile."""

    @property
    def incarnation(self) -> str:
        return self.metadata.get(INCARNATION, "")


class UnauthenticatedError(PurgatoryError):
    pass


class PermissionDeniedError(PurgatoryError):
    pass


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
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.CANCELLED: CancelledError,
}


def _pairs(metadata: Any) -> Iterable[tuple[str, str]]:
    """Text entries (binary ``-bin`` ones are not text; see :func:`_status_details`)."""
    if not metadata:
        return ()
    return (
        (str(k), v if isinstance(v, str) else v.decode("utf-8", "replace"))
        for k, v in metadata
        if not str(k).endswith("-bin")
    )


def _status_details(metadata: Any) -> tuple[Message, ...]:
    """The known detail messages of the ``google.rpc.Status`` trailer, if any."""
    for key, value in metadata or ():
        if key != DETAILS_KEY:
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            return ()
        out: list[Message] = []
        for packed in status.details:
            for cls in _DETAIL_TYPES:
                if packed.Is(cls.DESCRIPTOR):
                    msg = cls()
                    packed.Unpack(msg)
                    out.append(msg)
        return tuple(out)
    return ()


def invalid_argument(field: str, problem: str) -> InvalidArgumentError:
    """The client-side twin of the server's INVALID_ARGUMENT (raised before sending)."""
    violation = error_details_pb2.BadRequest.FieldViolation(field=field, description=problem)
    return InvalidArgumentError(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{field}: {problem}",
        status_details=(error_details_pb2.BadRequest(field_violations=[violation]),),
    )


# A plaintext channel to a TLS server sees the connection closed and nothing more.
PLAINTEXT_HINT = (
    " (this client is plaintext: if the server serves TLS, pass tls_ca='ca.pem', or "
    "tls=True for a certificate the system trusts)"
)


def from_rpc_error(exc: grpc.RpcError, *, plaintext: bool = False) -> PurgatoryError:
    """The PurgatoryError for a failed sync or aio call (``plaintext``: the call went over
    a channel without TLS, so a bare "Socket closed" gets a hint)."""
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or ""
    trailing = exc.trailing_metadata()
    metadata = dict(_pairs(trailing))
    cls = _BY_CODE.get(code, ServerError)
    if cls is ResourceExhaustedError and RESUME_AFTER in metadata:
        cls = SlowSubscriberError
    elif cls is FailedPreconditionError and INCARNATION in metadata:
        cls = StreamResetError
    hint = ""
    if plaintext and code is grpc.StatusCode.UNAVAILABLE and "Socket closed" in details:
        hint = PLAINTEXT_HINT
    return cls(code, details, metadata, _status_details(trailing), hint)


def error_for_code(
    code: grpc.StatusCode, details: str, metadata: Mapping[str, str] | None = None
) -> PurgatoryError:
    """The PurgatoryError for a status carried in a message (a Session acknowledgement)."""
    return _BY_CODE.get(code, ServerError)(code, details, metadata)
