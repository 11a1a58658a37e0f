"""Service errors as gRPC statuses: the ONE place the status mapping lives (edge only).

:func:`status_for` turns a :class:`~.errors.ServiceError` into the (code, message,
trailing metadata) a call ends with; :func:`abort` ends a call that way. Every status
carries a ``google.rpc.Status`` in ``grpc-status-details-bin`` (built with grpcio-status):
``BadRequest`` field violations for INVALID_ARGUMENT, ``RetryInfo`` (the error's
``retry_after_s``) for RESOURCE_EXHAUSTED and UNAVAILABLE, ``ResourceInfo`` for NOT_FOUND.
"""

from __future__ import annotations

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from purgatory_server._service.config.logs import log_rejected
from purgatory_server._service.model.errors import Code, InvalidArgument, NotFound, ServiceError

__all__ = ["Metadata", "abort", "grpc_code", "status_for"]

_GRPC_CODES: dict[Code, grpc.StatusCode] = {Code(code.value[0]): code for code in grpc.StatusCode}


def grpc_code(code: Code) -> grpc.StatusCode:
    return _GRPC_CODES[code]


def _retry_info(delay_s: float) -> Message:
    seconds = int(delay_s)
    info: Message = error_details_pb2.RetryInfo(
        retry_delay=Duration(seconds=seconds, nanos=int((delay_s - seconds) * 1e9))
    )
    return info


def error_details(exc: ServiceError) -> tuple[Message, ...]:
    """The google.rpc error-detail messages of ``exc``'s status."""
    details: list[Message] = []
    if isinstance(exc, InvalidArgument):
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=exc.field, description=exc.problem
        )
        details.append(error_details_pb2.BadRequest(field_violations=[violation]))
    elif isinstance(exc, NotFound):
        details.append(
            error_details_pb2.ResourceInfo(
                resource_type=exc.resource_type,
                resource_name=exc.resource_name,
                description=exc.message,
            )
        )
    if exc.retry_after_s is not None:
        details.append(_retry_info(exc.retry_after_s))
    return tuple(details)


Metadata = tuple[tuple[str, str | bytes], ...]


def status_for(exc: ServiceError) -> tuple[grpc.StatusCode, str, Metadata]:
    """The (code, message, trailing metadata) a servicer aborts with for ``exc``.

    The trailing metadata holds ``exc``'s own entries and ``grpc-status-details-bin``
    (a ``google.rpc.Status`` with the same code and message and ``exc``'s details).
    """
    status = status_pb2.Status(code=int(exc.code), message=exc.message)
    for detail in error_details(exc):
        status.details.add().Pack(detail)
    rich = rpc_status.to_status(status)
    return grpc_code(exc.code), exc.message, (*exc.trailing_metadata(), *rich.trailing_metadata)


async def abort(context: grpc.aio.ServicerContext, exc: ServiceError) -> None:
    """End the call with ``exc``'s status (raises grpc's AbortError to unwind).

    ``exc``'s traceback is dropped first: the AbortError would otherwise keep a cycle
    through the frames holding the refused request, freed only by the collector. (The
    edge's handlers drop their ``request`` before calling this, for the same reason.)
    """
    exc.__traceback__ = None
    code, message, metadata = status_for(exc)
    log_rejected(code.name, message)
    await context.abort(code, message, metadata)
