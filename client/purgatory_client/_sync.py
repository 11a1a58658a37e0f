# Generated from _async.py by client/generate_sync.py: do not edit by hand.
# Edit _async.py, then run `make sync-client` (`make test` checks this file).
"""PurgatoryClient: one grpc channel, every RPC of ``purgatory.v1.PurgatoryService``.

Every method raises :mod:`purgatory_client.errors` exceptions, never ``grpc.RpcError``.
Here: the channel, the calls, the purgatories' admin and the operations; the features'
methods come from the mixins named in :mod:`purgatory_client._base`. Interrupting a
long-poll (cancelling the task, or Ctrl-C) ends the call, not the operation: it stays in
the purgatory.

Thread safety: the channel's own (the blocking client may be shared by threads; the
asyncio one belongs to the event loop it was created on).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_client import _requests, _responses
from purgatory_client._long_poll import channel_options
from purgatory_client._models import (
    BatchSignalResult,
    Condition,
    ForceCompleteResult,
    OperationSpec,
    OperationStatus,
    PurgatoryConfig,
    PurgatoryInfo,
    Signal,
)
from purgatory_client._requests import DEFAULT_PURGATORY
from purgatory_client._resume import LongPollRetry, ResumePolicy
from purgatory_client._routing import Router, purgatory_of
from purgatory_client._security import resolve_security
from purgatory_client._sync_delayed import DelayedMethods
from purgatory_client._sync_schedules import ScheduleMethods
from purgatory_client._sync_streams import StreamMethods
from purgatory_client.errors import PurgatoryError, UnavailableError, from_rpc_error
from purgatory_client.tracing import with_trace

__all__ = ["PurgatoryClient"]


class PurgatoryClient(StreamMethods, DelayedMethods, ScheduleMethods):
    """Client of ``purgatory.v1.PurgatoryService``.

    ``timeout`` is the default deadline (seconds) of short calls; long-polls
    (``wait=True``) and ``subscribe`` have no deadline unless one is passed.

    A long-poll that fails with UNAVAILABLE (a server restart) is re-sent with the same
    operation id (one is made up if none is given): by gRPC's retry policy, which the
    client puts in its channel's service config, and then by the ``resume`` policy
    (:class:`ResumePolicy`; docs/clients.md "What every client must do right").

    Security (see :mod:`purgatory_client._security`): ``token`` is sent as
    ``authorization: Bearer <token>`` with every call; ``tls_ca`` (PEM file of trusted
    CAs), ``tls_cert``/``tls_key`` (client certificate for mutual TLS) or ``tls=True``
    (system roots) connect over TLS. Left out, they come from ``PURGATORY_TOKEN``,
    ``PURGATORY_TLS_CA``, ``PURGATORY_TLS_CERT`` and ``PURGATORY_TLS_KEY`` unless
    ``trust_env=False``.
    """

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        purgatory: str = DEFAULT_PURGATORY,
        timeout: float | None = 30.0,
        channel: grpc.Channel | None = None,
        resume: ResumePolicy | None = None,
        options: Sequence[tuple[str, Any]] = (),
        token: str | None = None,
        tls: bool | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        trust_env: bool = True,
    ) -> None:
        security = resolve_security(
            token=token,
            tls=tls,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            trust_env=trust_env,
        )
        self._metadata = security.metadata
        credentials = security.channel_credentials()
        self._owns_channel = channel is None
        # No TLS on a channel of our own: a bare "Socket closed" gets a hint (errors.py).
        self._plaintext = channel is None and credentials is None
        self._channel: grpc.Channel
        if channel is not None:
            self._channel = channel
        elif credentials is not None:
            self._channel = grpc.secure_channel(target, credentials, channel_options(options))
        else:
            self._channel = grpc.insecure_channel(target, channel_options(options))
        self._stub = pb_grpc.PurgatoryServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self.purgatory = purgatory
        self.timeout = timeout
        self._resume = resume or ResumePolicy()
        # Replicated purgatories: follow `purgatory-owner` and cache the route (_routing).
        self._router = Router(
            self._stub,
            lambda address: (
                grpc.secure_channel(address, credentials, channel_options(options))
                if credentials is not None
                else grpc.insecure_channel(address, channel_options(options))
            ),
            pb_grpc.PurgatoryServiceStub,
        )

    # ------------------------------------------------------------ plumbing
    def __enter__(self) -> PurgatoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_channel:
            self._channel.close()
        for channel in self._router.channels():
            channel.close()

    def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        purgatory = purgatory_of(request)
        hop = 0
        while True:
            sent_to = self._router.routes.get(purgatory, "")
            try:
                return self._router.method(purgatory, method)(
                    request, timeout=timeout, metadata=with_trace(self._metadata)
                )
            except grpc.RpcError as exc:
                if not self._router.reroute(purgatory, method, exc, hop, sent_to):
                    raise from_rpc_error(exc, plaintext=self._plaintext) from None
                hop += 1

    def _long_poll(self, method: Any, request: Any, timeout: float | None) -> Any:
        """``method(request)`` re-sent after UNAVAILABLE (see ``_resume.LongPollRetry``)."""
        retry = LongPollRetry(self._resume, timeout)
        while True:
            try:
                return self._call(method, request, retry.remaining())
            except UnavailableError as exc:
                delay = retry.delay(exc)
            time.sleep(delay)

    def _find_owner(self, name: str) -> None:
        """Learn where ``name`` lives before a Session stream is opened there: a refusal
        would end the whole stream (_routing)."""
        if self._router.needs_probe(name):
            try:
                self._call(self._stub.GetPurgatory, pb.GetPurgatoryRequest(name=name), self.timeout)
                self._router.probed(name)
            except PurgatoryError:
                pass  # the session's frames get the error themselves

    # ------------------------------------------------------------ admin
    def create_purgatory(self, name: str, config: PurgatoryConfig | None = None) -> PurgatoryInfo:
        req = pb.CreatePurgatoryRequest(
            name=_requests.name_field("name", name), config=_requests.config_to_proto(config)
        )
        resp = self._call(self._stub.CreatePurgatory, req, self.timeout)
        return _responses.info_from_proto(resp.purgatory)

    def delete_purgatory(self, name: str) -> int:
        """Delete; returns how many pending operations ended CANCELLED."""
        req = pb.DeletePurgatoryRequest(name=_requests.name_field("name", name))
        return int(self._call(self._stub.DeletePurgatory, req, self.timeout).cancelled)

    def list_purgatories(self) -> list[PurgatoryInfo]:
        resp = self._call(self._stub.ListPurgatories, pb.ListPurgatoriesRequest(), self.timeout)
        return [_responses.info_from_proto(p) for p in resp.purgatories]

    def get_purgatory(self, name: str | None = None) -> PurgatoryInfo:
        req = pb.GetPurgatoryRequest(name=_requests.name_field("name", self._name(name)))
        resp = self._call(self._stub.GetPurgatory, req, self.timeout)
        return _responses.info_from_proto(resp.purgatory)

    # ------------------------------------------------------------ operations
    def try_complete_else_watch(
        self,
        keys: Sequence[str],
        timeout_ms: int,
        *,
        condition: Condition | None = None,
        payload: bytes = b"",
        operation_id: str = "",
        wait: bool = False,
        purgatory: str | None = None,
        timeout: float | None = None,
        due_time_ms: int = 0,
        extend_on_resend: bool = False,
        max_extend_ms: int = 0,
    ) -> OperationStatus:
        """Register an operation; with ``wait=True`` return only once it has ended.

        ``due_time_ms`` (with ``timeout_ms=0``): an absolute deadline, Unix epoch ms,
        judged on the server's wall clock (not this machine's).
        ``extend_on_resend`` (debounce): a re-send of this ``operation_id`` while it is
        pending pushes the deadline to now + ``timeout_ms``, never past its creation
        time + ``max_extend_ms`` (0: no cap); the policy is the one it was created with.
        """
        req = _requests.watch_request(
            self._name(purgatory),
            keys=keys,
            timeout_ms=timeout_ms,
            condition=condition,
            payload=payload,
            operation_id=operation_id,
            wait=wait,
            due_time_ms=due_time_ms,
            extend_on_resend=extend_on_resend,
            max_extend_ms=max_extend_ms,
        )
        if wait:
            resp = self._long_poll(self._stub.TryCompleteElseWatch, req, timeout)
        else:
            deadline = self.timeout if timeout is None else timeout
            resp = self._call(self._stub.TryCompleteElseWatch, req, deadline)
        return _responses.status_from_proto(resp, payload)

    def wait(
        self,
        keys: Sequence[str],
        timeout_ms: int,
        *,
        condition: Condition | None = None,
        payload: bytes = b"",
        operation_id: str = "",
        purgatory: str | None = None,
        timeout: float | None = None,
    ) -> OperationStatus:
        """The long-poll: register and return only once the operation has ended."""
        return self.try_complete_else_watch(
            keys,
            timeout_ms,
            condition=condition,
            payload=payload,
            operation_id=operation_id,
            wait=True,
            purgatory=purgatory,
            timeout=timeout,
        )

    def batch_try_complete_else_watch(
        self,
        operations: Iterable[OperationSpec],
        *,
        wait: bool = False,
        purgatory: str | None = None,
        timeout: float | None = None,
    ) -> list[OperationStatus]:
        specs = _requests.batch_specs(operations)
        req = _requests.batch_watch_request(self._name(purgatory), specs, wait)
        if wait:
            resp = self._long_poll(self._stub.BatchTryCompleteElseWatch, req, timeout)
        else:
            deadline = self.timeout if timeout is None else timeout
            resp = self._call(self._stub.BatchTryCompleteElseWatch, req, deadline)
        return _responses.statuses_from_proto(resp, [s.payload for s in specs])

    def check_and_complete(
        self, key: str, signal: Signal | None = None, *, purgatory: str | None = None
    ) -> int:
        """Signal ``key``; returns how many operations this completed."""
        req = _requests.signal_request(self._name(purgatory), key, signal)
        return int(self._call(self._stub.CheckAndComplete, req, self.timeout).completed)

    def batch_check_and_complete(
        self,
        signals: Iterable[tuple[str, Signal | None] | str],
        *,
        purgatory: str | None = None,
    ) -> BatchSignalResult:
        req = _requests.batch_signal_request(self._name(purgatory), signals)
        resp = self._call(self._stub.BatchCheckAndComplete, req, self.timeout)
        return _responses.batch_signal_from_proto(resp)

    def force_complete(
        self, operation_id: str, *, purgatory: str | None = None
    ) -> ForceCompleteResult:
        req = pb.ForceCompleteRequest(
            purgatory=_requests.name_field("purgatory", self._name(purgatory)),
            operation_id=_requests.name_field("operation_id", operation_id),
        )
        return _responses.force_from_proto(self._call(self._stub.ForceComplete, req, self.timeout))

    def get_operation(self, operation_id: str, *, purgatory: str | None = None) -> OperationStatus:
        req = pb.GetOperationRequest(
            purgatory=_requests.name_field("purgatory", self._name(purgatory)),
            operation_id=_requests.name_field("operation_id", operation_id),
        )
        resp = self._call(self._stub.GetOperation, req, self.timeout)
        return _responses.status_from_proto(resp.operation)
