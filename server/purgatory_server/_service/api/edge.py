"""The gRPC edge of PurgatoryService: decoding, authentication and the last-resort status.

:func:`add_purgatory_service` registers the servicer's methods with three things around
each call:

1. **Decoding that cannot escape as UNKNOWN.** A protobuf ``DecodeError`` becomes an
   :class:`Undecodable` marker and the call ends with INVALID_ARGUMENT naming
   ``request``.
2. **Authentication and permissions** when tokens are configured (:mod:`.auth`): the
   ``authorization`` header is checked before the request is looked at
   (UNAUTHENTICATED), then the permission the method needs on the purgatory it names
   (PERMISSION_DENIED). Health checking and reflection stay open. A client-streaming RPC
   is checked once when it starts; ``Session`` frames and ``AckStream`` requests are
   authorized one by one (:func:`_session_frames`, :func:`_ack_frames`).
3. **INTERNAL only for bugs, logged once.** A :class:`~.errors.ServiceError` becomes its
   status (:func:`~.status_mapping.status_for`); any other exception is logged with its
   traceback and the caller gets INTERNAL with a fixed message (never UNKNOWN, never the
   exception text, which may hold request data).

Thread-safety: handlers run on the server's event loop; the wrappers hold no state.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.session_resume import SESSION_OWNER
from purgatory_server._service.api.session_rpc import RefusedFrame
from purgatory_server._service.api.status_mapping import abort
from purgatory_server._service.config.auth import Authorizer, Permission, TokenGrant
from purgatory_server._service.model.errors import Internal, InvalidArgument, ServiceError

__all__ = ["METHOD_RULES", "Undecodable", "add_purgatory_service"]

logger = logging.getLogger("purgatory_server.service")

_SERVICE = pb.DESCRIPTOR.services_by_name["PurgatoryService"]
SERVICE_NAME: str = _SERVICE.full_name

# method -> (permission it needs (None: any), request field naming the purgatory (None:
# the method names none)). A method missing here (an RPC added later) needs ``admin`` on
# every purgatory until it is given its own rule: the safe default.
METHOD_RULES: dict[str, tuple[Permission | None, str | None]] = {
    "CreatePurgatory": (Permission.ADMIN, "name"),
    "DeletePurgatory": (Permission.ADMIN, "name"),
    "ListPurgatories": (None, None),
    "GetPurgatory": (None, "name"),
    "TryCompleteElseWatch": (Permission.WATCH, "purgatory"),
    "BatchTryCompleteElseWatch": (Permission.WATCH, "purgatory"),
    "GetOperation": (Permission.WATCH, "purgatory"),
    "CheckAndComplete": (Permission.SIGNAL, "purgatory"),
    "BatchCheckAndComplete": (Permission.SIGNAL, "purgatory"),
    "ForceComplete": (Permission.FORCE, "purgatory"),
    "Subscribe": (Permission.SUBSCRIBE, "purgatory"),
    # Any valid token may open a session; each frame needs WATCH, SIGNAL and/or FORCE on
    # the purgatory it names (_session_frames).
    "Session": (None, None),
    "Cancel": (Permission.FORCE, "purgatory"),
    "Reschedule": (Permission.FORCE, "purgatory"),
    # Upserting or deleting a schedule can cancel its armed occurrence (a replace does),
    # another caller's operation: force, as Cancel. Listing them reads (watch).
    "UpsertSchedule": (Permission.FORCE, "purgatory"),
    "ListSchedules": (Permission.WATCH, "purgatory"),
    "DeleteSchedule": (Permission.FORCE, "purgatory"),
    # Worker groups: consumers' calls need SUBSCRIBE, deleting a group ADMIN.
    "Ack": (Permission.SUBSCRIBE, "purgatory"),
    "ExtendLease": (Permission.SUBSCRIBE, "purgatory"),
    "Nack": (Permission.SUBSCRIBE, "purgatory"),
    "AckBatch": (Permission.SUBSCRIBE, "purgatory"),
    # Any valid token may open one; each request needs SUBSCRIBE on its purgatory
    # (_ack_frames).
    "AckStream": (None, None),
    "ListDeadLetters": (Permission.SUBSCRIBE, "purgatory"),
    "Redrive": (Permission.SUBSCRIBE, "purgatory"),
    "DiscardDeadLetters": (Permission.SUBSCRIBE, "purgatory"),
    "ListGroups": (Permission.SUBSCRIBE, "purgatory"),
    "DeleteGroup": (Permission.ADMIN, "purgatory"),
    "ListOperations": (Permission.WATCH, "purgatory"),
}


class Undecodable:
    """Stands in for a request whose bytes did not parse (see module docstring)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _deserializer(message_cls: Any) -> Callable[[bytes], Any]:
    from_string = message_cls.FromString

    def deserialize(data: bytes) -> Any:
        try:
            return from_string(data)
        except (DecodeError, RecursionError, ValueError) as exc:
            # DecodeError's text names protobuf internals, not caller data: safe to repeat.
            return Undecodable(str(exc)[:100] or type(exc).__name__)

    return deserialize


def _authorization(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value if isinstance(value, str) else bytes(value).decode("latin-1")
    return None


class _Guard:
    """The checks every call of one method goes through before the servicer runs."""

    __slots__ = ("_authorizer", "_field", "_frames", "_permission")

    def __init__(self, method: str, authorizer: Authorizer | None) -> None:
        self._authorizer = authorizer
        self._permission, self._field = METHOD_RULES.get(method, (Permission.ADMIN, None))
        self._frames = _FRAME_CHECKS.get(method)

    def check(self, request: Any, context: Any) -> Any:
        """``request`` once it decoded and the caller may send it."""
        authorizer = self._authorizer
        grant = None
        if authorizer is not None:
            grant = authorizer.authenticate(_authorization(context))
        if type(request) is Undecodable:
            raise InvalidArgument("request", f"cannot be decoded ({request.reason})")
        if authorizer is not None and grant is not None:
            purgatory = getattr(request, self._field) if self._field is not None else None
            authorizer.authorize(grant, self._permission, purgatory)
        return request

    def check_stream(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """A client-streaming call: the caller checked now, each message as it arrives."""
        authorizer = self._authorizer
        grant = None
        if authorizer is not None:
            grant = authorizer.authenticate(_authorization(context))
            authorizer.authorize(grant, self._permission, None)
        if self._frames is not None:
            return self._frames(requests, authorizer, grant)
        return _decoded(requests)


async def _decoded(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        if type(request) is Undecodable:
            raise InvalidArgument("request", f"cannot be decoded ({request.reason})")
        yield request


async def _session_frames(
    frames: AsyncIterator[Any], authorizer: Authorizer | None, grant: TokenGrant | None
) -> AsyncIterator[Any]:
    """A Session's frames, decoded and authorized one by one.

    An undecodable frame ends the stream (INVALID_ARGUMENT: without its request_id the
    client could not match an acknowledgement to it). A frame the token may not send
    becomes a :class:`RefusedFrame`, acknowledged with PERMISSION_DENIED; the stream goes on.
    """
    async for frame in frames:
        if type(frame) is Undecodable:
            raise InvalidArgument("request", f"cannot be decoded ({frame.reason})")
        if authorizer is not None and grant is not None:
            try:
                if frame.watches:
                    authorizer.authorize(grant, Permission.WATCH, frame.purgatory)
                if frame.signals:
                    authorizer.authorize(grant, Permission.SIGNAL, frame.purgatory)
                if frame.force_complete:
                    authorizer.authorize(grant, Permission.FORCE, frame.purgatory)
            except ServiceError as exc:
                yield RefusedFrame(frame.request_id, exc)
                continue
            if frame.session_id:  # a session is resumed only by the token that named it
                frame.session_id = f"{grant.name}{SESSION_OWNER}{frame.session_id}"
        yield frame


async def _ack_frames(
    requests: AsyncIterator[Any], authorizer: Authorizer | None, grant: TokenGrant | None
) -> AsyncIterator[Any]:
    """AckStream's requests, decoded and authorized one by one: one the token may not
    send becomes a :class:`RefusedFrame` (no request id: answers go in request order),
    answered with PERMISSION_DENIED; the stream goes on. An undecodable one ends it."""
    async for request in requests:
        if type(request) is Undecodable:
            raise InvalidArgument("request", f"cannot be decoded ({request.reason})")
        if authorizer is not None and grant is not None:
            try:
                authorizer.authorize(grant, Permission.SUBSCRIBE, request.purgatory)
            except ServiceError as exc:
                yield RefusedFrame(0, exc)
                continue
        yield request


FrameCheck = Callable[
    [AsyncIterator[Any], Authorizer | None, TokenGrant | None], AsyncIterator[Any]
]
# Client-streaming methods whose messages are authorized one by one.
_FRAME_CHECKS: dict[str, FrameCheck] = {"Session": _session_frames, "AckStream": _ack_frames}


async def _internal(context: Any, method: str, exc: BaseException) -> None:
    logger.error("bug in %s; the caller gets INTERNAL", method, exc_info=exc)
    await abort(context, Internal())


Prepare = Callable[[Any, Any], Any]


def _unary(
    method: str, behavior: Callable[[Any, Any], Awaitable[Any]], prepare: Prepare
) -> Callable[[Any, Any], Awaitable[Any]]:
    async def handle(request: Any, context: Any) -> Any:
        try:
            return await behavior(prepare(request, context), context)
        except ServiceError as exc:
            request = None  # the AbortError keeps this frame (see abort())
            await abort(context, exc)
        except grpc.aio.AbortError:
            raise  # the servicer already ended the call with its status
        except Exception as exc:  # noqa: BLE001 - the last resort: a bug becomes INTERNAL
            await _internal(context, method, exc)
        return None  # pragma: no cover - abort raises

    return handle


def _stream(
    method: str, behavior: Callable[[Any, Any], AsyncIterator[Any]], prepare: Prepare
) -> Callable[[Any, Any], AsyncIterator[Any]]:
    async def handle(request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            async for item in behavior(prepare(request, context), context):
                yield item
        except ServiceError as exc:
            request = None  # the AbortError keeps this frame (see abort())
            await abort(context, exc)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - the last resort: a bug becomes INTERNAL
            await _internal(context, method, exc)

    return handle


# (client streaming, server streaming) -> gRPC's handler factory.
_FACTORIES: dict[tuple[bool, bool], Callable[..., grpc.RpcMethodHandler]] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}
# Wraps one method's finished handler (observability: metrics and a span around the
# whole call, edge included): (full method name, server-streaming?, handler) -> handler.
MethodWrapper = Callable[[str, bool, Callable[..., Any]], Callable[..., Any]]


def _passthrough(response_cls: Any) -> Callable[[Any], bytes]:
    """A streaming method's serializer: a message is serialized, ``bytes`` (a message
    encoded once for many streams: :mod:`.event_cache`) are sent as they are."""
    serialize = response_cls.SerializeToString

    def serializer(message: Any) -> bytes:
        return message if type(message) is bytes else serialize(message)

    return serializer


def add_purgatory_service(
    server: grpc.aio.Server,
    servicer: Any,
    authorizer: Authorizer | None,
    wrap: MethodWrapper | None = None,
) -> None:
    """Register ``servicer``'s RPCs on ``server`` behind the edge (module docstring);
    ``wrap``, if given, wraps each method's handler once, outside the edge."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in _SERVICE.methods:
        name = method.name
        request_cls = getattr(pb, method.input_type.name)
        response_cls = getattr(pb, method.output_type.name)
        guard = _Guard(name, authorizer)
        behavior = getattr(servicer, name)
        prepare = guard.check_stream if method.client_streaming else guard.check
        # An async generator yields its responses; a coroutine returns its one response,
        # or (Session) writes its responses with context.write and returns None.
        yields = inspect.isasyncgenfunction(behavior)
        handle = (_stream if yields else _unary)(name, behavior, prepare)
        if wrap is not None:
            handle = wrap(f"{SERVICE_NAME}/{name}", yields, handle)
        factory = _FACTORIES[method.client_streaming, method.server_streaming]
        handlers[name] = factory(
            handle,
            request_deserializer=_deserializer(request_cls),
            response_serializer=(
                _passthrough(response_cls)
                if method.server_streaming
                else response_cls.SerializeToString
            ),
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
