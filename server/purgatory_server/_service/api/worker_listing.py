"""ListPurgatories of the whole server when it runs as several workers (workers/), and of
the whole cluster with ``[cluster]``.

The worker a client reached asks each sibling on its own port for *its* purgatories
(metadata ``purgatory-worker-local``: no further fan-out) and answers the union, sorted by
name. In a cluster, a server asks the owner of each replicated purgatory it does not serve
for that one (GetPurgatory: no fan-out either), so every server lists every purgatory of
the cluster. The caller's ``authorization`` travels with the question, so a token sees the
same purgatories everywhere. A sibling or owner that does not answer (or a replicated
purgatory with no owner yet) makes the listing UNAVAILABLE rather than silently short.

Channels to siblings are opened on first use and kept until the server stops;
loop-confined like the servicer.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from purgatory_server._service.model.errors import SiblingUnavailable

__all__ = ["METADATA_LOCAL", "Siblings"]

METADATA_LOCAL = "purgatory-worker-local"
ASK_TIMEOUT_S = 5.0


class Siblings:
    """The other workers' stubs, for the whole-server listing."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self._addresses = tuple(addresses)
        self._stubs: dict[str, pb_grpc.PurgatoryServiceStub] = {}
        self._channels: list[grpc.aio.Channel] = []

    def __bool__(self) -> bool:
        return bool(self._addresses)

    def _stub(self, address: str) -> pb_grpc.PurgatoryServiceStub:
        stub = self._stubs.get(address)
        if stub is None:
            channel = grpc.aio.insecure_channel(address)
            self._channels.append(channel)
            stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
            self._stubs[address] = stub
        return stub

    async def close(self) -> None:
        """Close the channels (server stop)."""
        channels, self._channels, self._stubs = self._channels, [], {}
        for channel in channels:
            await channel.close()

    @staticmethod
    def local_only(context: grpc.aio.ServicerContext) -> bool:
        """Whether this call is a sibling's question (answer with this worker's own)."""
        return any(k == METADATA_LOCAL for k, _ in context.invocation_metadata() or ())

    @staticmethod
    def _forwarded(context: grpc.aio.ServicerContext) -> list[tuple[str, str]]:
        """The caller's token, for a question asked on its behalf."""
        return [
            (k, v)
            for k, v in context.invocation_metadata() or ()
            if k == "authorization" and isinstance(v, str)
        ]

    async def owned_elsewhere(
        self, owners: Sequence[tuple[str, str]], context: grpc.aio.ServicerContext
    ) -> list[pb.Purgatory]:
        """Each ``(name, owner)`` replicated purgatory as its owner reports it; Unavailable
        if one has no owner yet or its owner does not answer."""
        metadata = self._forwarded(context)
        found: list[pb.Purgatory] = []
        for name, owner in owners:
            if not owner:
                raise SiblingUnavailable(
                    f"purgatory {name!r} is being taken over (no owner yet); retry shortly"
                )
            try:
                response = await self._stub(owner).GetPurgatory(
                    pb.GetPurgatoryRequest(name=name), metadata=metadata, timeout=ASK_TIMEOUT_S
                )
            except grpc.aio.AioRpcError as exc:
                raise SiblingUnavailable(
                    f"purgatory {name!r}'s owner at {owner} did not answer the listing "
                    f"({exc.code().name}); retry shortly"
                ) from None
            found.append(response.purgatory)
        return found

    async def listed(self, context: grpc.aio.ServicerContext) -> list[pb.Purgatory]:
        """The siblings' purgatories; Unavailable if one of them does not answer."""
        metadata = [(METADATA_LOCAL, "1"), *self._forwarded(context)]
        found: list[pb.Purgatory] = []
        for address in self._addresses:
            try:
                response = await self._stub(address).ListPurgatories(
                    pb.ListPurgatoriesRequest(), metadata=metadata, timeout=ASK_TIMEOUT_S
                )
            except grpc.aio.AioRpcError as exc:
                raise SiblingUnavailable(
                    f"worker at {address} did not answer the listing "
                    f"({exc.code().name}); retry shortly"
                ) from None
            found.extend(response.purgatories)
        return found
