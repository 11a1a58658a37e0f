"""What a page handler is given: the session's client, its CSRF token, the figures.

The client (:class:`purgatory_client.AsyncPurgatoryClient`) carries the session's token
to the server's own gRPC port, so what a page reads and what an action does is checked by
the gRPC edge exactly as the same RPC from any client (permission, purgatory, status).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from purgatory_server._service.console.figures import Figures
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.errors import ServiceError

if TYPE_CHECKING:
    from purgatory_client import AsyncPurgatoryClient

__all__ = ["View"]


@dataclass(frozen=True, slots=True)
class View:
    client: AsyncPurgatoryClient
    csrf: str
    signed_in: str
    figures: Figures
    registry: PurgatoryRegistry

    def definition(self, purgatory: str, operation_id: str) -> OperationDefinition | None:
        """A pending operation's keys and condition, when its purgatory is served by this
        process (ListOperations carries neither); None otherwise."""
        named = next((p for p in self.registry.snapshot() if p.name == purgatory), None)
        if named is None:
            return None
        try:
            target = named.lookup(operation_id)
        except ServiceError:
            return None
        return target.definition if isinstance(target, RemoteOperation) else None
