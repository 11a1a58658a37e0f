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

Out of space (the journal's ``no_space``): a handler that writes (every one not passed
``reads=True``) is refused with RESOURCE_EXHAUSTED (:class:`JournalFull`, RetryInfo)
before it changes anything; a read is answered from memory without the barrier (it may
show what a write accepted just before the disk filled, still waiting to be journaled).
A write accepted just before waits for its records like any other: until the journal
writes them, once space is back, or its deadline.

A journal that failed (EIO, a failed fsync) gives FAILED_PRECONDITION (the call's
effects may not be durable); a closed one, UNAVAILABLE (shutting down). Subscribe and
Session keep the same rule their own way (the feed; :mod:`.session_rpc`).

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
from purgatory_server._service.model.errors import FailedPrecondition, JournalFull, ShuttingDown

__all__ = ["Handler", "Service", "acknowledged", "answer", "check_writable"]


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
    *,
    reads: bool = False,
) -> Resp:
    """Run ``handler`` on the purgatory ``request`` names; see the module docstring.
    ``reads``: the handler changes nothing (answered from memory while out of space)."""
    if check is not None:
        check(request, service.limits)
    purgatory = service.registry.get(request.purgatory)
    if purgatory.barrier is None:  # in memory: nothing to await
        return await handler(service, purgatory, request)
    if purgatory.journal.no_space is not None:
        if not reads:
            check_writable(purgatory)
        return await handler(service, purgatory, request)
    response = await handler(service, purgatory, request)
    await acknowledged(purgatory)
    return response


def check_writable(purgatory: NamedPurgatory) -> None:
    """Raise :class:`JournalFull` if ``purgatory``'s journal is out of space (call before
    changing anything)."""
    why = purgatory.journal.no_space
    if why is not None:
        raise JournalFull(purgatory.name, why)


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
