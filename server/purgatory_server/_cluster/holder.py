"""Holding an owned purgatory: renewing its lease, retried within the lease, until lost.

docs/scale-out.md, "Ownership, epochs and fencing" and "Failure cases". The owner renews
every ``lease / 3``. A renewal that fails on the way (a timeout, no JetStream leader, a
lost connection) is retried every :data:`RETRY_S` (each attempt bounded by the renewal
interval), so a blip shorter than the lease changes nothing. Ownership ends when:

- a renewal is refused (compare-and-set on our revision): another server holds the key;
- the lease lapses before a renewal got through: nobody can tell whether another server
  acquired meanwhile, so the purgatory stops being served (reads included: the node's
  ``route`` already refuses once ``valid()`` is false) and is evicted. If the bucket was
  unreachable all along (no JetStream leader), :attr:`Holding.lapsed` is set: this server
  then acquires the key again first once the bucket answers (:mod:`.key_view`), so the
  purgatory comes back here instead of every purgatory of the cluster moving at once;
- placement prefers another live member: it is handed over.

Thread-safety: loop-confined (the server's event loop), like :mod:`.node`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import nats.errors

from purgatory_server._cluster.log import ReplicatedLog
from purgatory_server._cluster.owner_lease import OwnerLease
from purgatory_server._cluster.placement import Member, Placement

__all__ = ["RETRY_S", "Holding", "hold"]

logger = logging.getLogger("purgatory_server.cluster")

RETRY_S = 0.1  # pause between renewal attempts after one failed on the way


@dataclass(slots=True)
class Holding:
    """How holding a purgatory ended (set by :func:`hold`)."""

    hand_over_to: Member | None = None
    # The lease lapsed only because the bucket could not be reached (no refusal seen).
    lapsed: bool = False


async def hold(  # noqa: PLR0917 - one call site, names kept apart
    name: str,
    lease: OwnerLease,
    log: ReplicatedLog,
    lost: asyncio.Event,
    placement: Placement,
    lease_s: float,
) -> Holding:
    """Renew ``lease`` until ownership ends (see module docstring); the log is fenced."""
    result = Holding()
    interval = lease_s / 3
    owned_since = placement.clock()
    wait = 0.0  # renew at once: catching up and rebuilding used part of the lease
    failing_since: float | None = None
    while log.lost is None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await lost.wait()
        if log.lost is not None:
            break
        # One attempt may take a renewal interval: an answer that comes after the old
        # validity ended still counts (validity runs from when the renewal was sent).
        try:
            async with asyncio.timeout(interval):
                renewed = await lease.renew()
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            now = time.monotonic()
            if failing_since is None:
                failing_since = now
                logger.warning("cluster: purgatory %s: lease renewal failed: %s", name, exc)
            if not lease.valid():
                log.fence(
                    f"the owner lease lapsed: renewals failed for {now - failing_since:.1f}s "
                    f"({type(exc).__name__}: {exc})"
                )
                break
            wait = RETRY_S  # retried within the lease
            continue
        if failing_since is not None:
            logger.info(
                "cluster: purgatory %s: lease renewed after %.1fs of failures",
                name,
                time.monotonic() - failing_since,
            )
            failing_since = None
        wait = interval
        if not renewed:
            log.fence("another server acquired the lease")
        elif not lease.valid():
            log.fence("the lease expired before it could be renewed")
        elif (target := placement.hand_over_to(name, owned_since)) is not None:
            result.hand_over_to = target
            log.fence(f"handing over to {target.server_id} ({target.address}), placement")
    # Lost while renewals were failing on the way, none refused: the bucket was out of
    # reach (an append may have noticed the lapse first and fenced the log itself).
    result.lapsed = failing_since is not None and not lease.valid()
    return result
