"""The one way a unary RPC on a purgatory answers: look it up, answer, await the barrier.

A *handler* is an async ``handler(service, purgatory, request) -> response`` in its
feature's ``*_rpc`` module. :func:`answer`:

1. runs the handler's request-only ``check`` if it has one (INVALID_ARGUMENT before the
   look-up);
2. looks the purgatory up by ``request.purgatory`` (NOT_FOUND, or the cluster's routing
   error for a purgatory served elsewhere);
3. runs the handler;
4. **the barrier rule**: if the purgatory is durable, awaits its ``barrier`` before
   returning, reads included: an answer never reports a state the journal could still
   lose. An in-memory purgatory answers at once.

A journal that cannot write gives FAILED_PRECONDITION (the call's effects may not be
durable); a closed one, UNAVAILABLE (shutting down). Subscribe and Session keep the same
rule their own way (the feed; :mod:`.session_rpc`).

Thread safety: the server's event loop, like the purgatories.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from purgatory_server._journal import JournalClosedError, JournalError
from purgatory_server._service.api.admission import NO_ADMISSION, Admission
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.model.errors import FailedPrecondition, ShuttingDown

__all__ = ["Handler", "Service", "acknowledged", "answer"]


@dataclass(frozen=True, slots=True)
class Service:
    """What every handler is given: the registry, the loop it runs on, the limits, the
    admission control of bulk requests."""

    registry: PurgatoryRegistry
    loop: asyncio.AbstractEventLoop
    limits: Limits
    # Sheds bulk requests while the loop runs late (.admission); off by default.
    admission: Admission = NO_ADMISSION


class PurgatoryRequest(Protocol):
    """A request that names its purgatory (every message with a ``purgatory`` field)."""

    @property
    def purgatory(self) -> str: ...


Req = TypeVar("Req", bound=PurgatoryRequest)
Resp = TypeVar("Resp")
Handler = Callable[[Service, NamedPurgatory, Req], Awaitable[Resp]]


async def answer(
    service: Service,
    request: Req,
    handler: Handler[Req, Resp],
    check: Callable[[Req, Limits], None] | None = None,
) -> Resp:
    """Run ``handler`` on the purgatory ``request`` names; see the module docstring."""
    if check is not None:
        check(request, service.limits)
    purgatory = service.registry.get(request.purgatory)
    response = await handler(service, purgatory, request)
    if purgatory.barrier is not None:  # in memory: nothing to await
        await acknowledged(purgatory)
    return response


async def acknowledged(purgatory: NamedPurgatory) -> None:
    """Return once everything recorded so far (this call's records included) is written
    under the journal's fsync policy (docs/journal.md); at once in memory."""
    barrier = purgatory.barrier
    if barrier is not None:
        try:
            await barrier()
        except JournalClosedError as exc:
            raise ShuttingDown() from exc
        except (JournalError, OSError) as exc:
            raise FailedPrecondition(
                f"purgatory {purgatory.name!r} cannot write its journal: {str(exc)[:100]}"
            ) from exc
