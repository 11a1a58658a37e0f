"""Deleted replicated purgatories stay deleted, on every server and across restarts.

docs/scale-out.md, "DeletePurgatory sticks". A replicated purgatory is named in every
server's configuration, so without a durable record each takeover (and each restart)
would build it again. ``DeletePurgatory`` at the owner therefore, before it answers:

1. drains the owner's log (the CANCELLED outcomes of its pending operations are appended);
2. writes a **tombstone**, key ``deleted.<token>`` in bucket ``purgatory-meta`` (R3, the
   same bucket that keeps the incarnation), acknowledged by the stream;
3. purges the purgatory's subject (its history is gone) and deletes its incarnation key.

Every server's cycle for the name (node.py) checks the tombstone before it stands by and
at each lease poll: a buried name is neither tailed nor taken over, its lease is released,
and requests for it answer NOT_FOUND on every server (:class:`PurgatoryDeleted`);
CreatePurgatory of it answers FAILED_PRECONDITION. A server restarted with the name still
in ``[cluster] replicated`` reads the tombstone before serving, so it stays deleted. Using
the name again takes an operator's act: ``python -m purgatory_server._cluster.tombstone
--nats URL revive NAME`` purges whatever history is left and removes the tombstone; the
servers' cycles then build a fresh, empty purgatory with a new incarnation.

Race with a standby's takeover: the owner releases its lease only after the tombstone is
acknowledged, and a standby checks the tombstone again *after* it acquired the lease,
reading it from the KV stream's leader (not a possibly lagging replica's direct get), so
no takeover can rebuild a buried purgatory.

Thread-safety: loop-confined (the server's event loop), like :mod:`.node`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import nats
import nats.errors
from nats.js.errors import KeyNotFoundError, NotFoundError, ServiceUnavailableError

from purgatory_server._cluster.layout import META_BUCKET, journal_stream, journal_subject, token
from purgatory_server._service.model.errors import DeleteNotRecorded

if TYPE_CHECKING:
    from purgatory_server._cluster.log import ReplicatedLog

__all__ = ["Buried", "Tombstones", "tombstone_key"]

logger = logging.getLogger("purgatory_server.cluster")

_KV_STREAM = f"KV_{META_BUCKET}"
_KV_OPERATION = "KV-Operation"  # header of a KV delete/purge marker


def tombstone_key(name: str) -> str:
    return f"deleted.{token(name)}"


class Buried(Exception):
    """Raised inside a cycle when its purgatory turns out to be deleted."""


class Tombstones:
    """The tombstones of this server's replicated purgatories (see module docstring)."""

    def __init__(self, js: Any, meta_kv: Any, streams: int) -> None:
        self._js = js
        self._meta_kv = meta_kv
        self._streams = streams
        self.deleted: set[str] = set()  # names known buried: route() answers NOT_FOUND

    async def check(self, name: str, *, leader: bool = True) -> bool:
        """Read the tombstone; remember and return it. ``leader``: from the KV stream's
        leader (authoritative), else from any replica (cheap, for the lease polls)."""
        try:
            if leader:
                subject = f"$KV.{META_BUCKET}.{tombstone_key(name)}"
                msg = await self._js.get_last_msg(_KV_STREAM, subject)
                buried = not (msg.headers or {}).get(_KV_OPERATION)
            else:
                await self._meta_kv.get(tombstone_key(name))  # a delete marker raises too
                buried = True
        except (NotFoundError, KeyNotFoundError):
            buried = False
        if buried:
            self.deleted.add(name)
        else:
            self.deleted.discard(name)
        return buried

    async def load(self, names: Iterable[str], timeout_s: float) -> None:
        """At start-up, before serving: read every tombstone, retried while JetStream is
        not ready (a new bucket's stream may still be electing its leader)."""
        deadline = time.monotonic() + timeout_s
        for name in names:
            while True:
                try:
                    await self.check(name)
                    break
                except (
                    nats.errors.TimeoutError,
                    nats.errors.NoRespondersError,
                    ServiceUnavailableError,
                ) as exc:
                    if time.monotonic() > deadline:
                        raise
                    logger.info("cluster: JetStream not ready (%s); retrying", type(exc).__name__)
                    await asyncio.sleep(0.2)

    async def ensure_alive(self, name: str, *, leader: bool = True) -> None:
        """Raise :class:`Buried` if ``name`` is deleted."""
        if await self.check(name, leader=leader):
            raise Buried(name)

    async def wait_alive(self, name: str, poll_s: float) -> None:
        """Block while ``name`` is deleted (a revive ends the wait)."""
        logged = False
        while await self.check(name):
            if not logged:
                logger.info("cluster: purgatory %s is deleted: not served here", name)
                logged = True
            await asyncio.sleep(poll_s)

    async def bury_owned(self, name: str, incarnation: str, log: ReplicatedLog) -> None:
        """DeletePurgatory at the owner: :meth:`bury`, then fence the owner's ``log`` so
        the lease is given up (DeleteNotRecorded if the tombstone could not be written)."""
        try:
            await self.bury(name, incarnation)
        except Exception as exc:
            log.fence("deletion not recorded")  # the next owner rebuilds it from the stream
            raise DeleteNotRecorded(name) from exc
        log.fence("deleted")

    async def bury(self, name: str, incarnation: str) -> None:
        """Write the tombstone, then purge the history and the incarnation."""
        value = {"incarnation": incarnation, "deleted_at_ms": int(time.time() * 1000)}
        await self._meta_kv.put(tombstone_key(name), json.dumps(value).encode())
        self.deleted.add(name)  # recorded: from here on the deletion stands
        stream = journal_stream(name, self._streams)
        try:
            await self._js.purge_stream(stream, subject=journal_subject(name, self._streams))
            await self._meta_kv.delete(token(name))  # a revive starts a new incarnation
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            # Still deleted (the tombstone stands); a revive purges again before it lifts it.
            logger.error(
                "cluster: purgatory %s deleted, but its history is not purged: %s", name, exc
            )
            return
        logger.warning("cluster: purgatory %s deleted cluster-wide (tombstone written)", name)


async def revive(urls: list[str], name: str) -> bool:
    """Remove ``name``'s tombstone; True if there was one."""
    nc = await nats.connect(servers=urls, connect_timeout=5)
    try:
        js = nc.jetstream(timeout=5)
        kv = await js.key_value(META_BUCKET)
        try:
            await kv.get(tombstone_key(name))
        except NotFoundError:
            return False
        # Whatever a failed purge left behind goes first: the revived purgatory is fresh.
        for info in await js.streams_info():
            stream = info.config.name or ""
            if stream.startswith("PURGATORY_J"):
                await js.purge_stream(stream, subject=f"purgatory.j.*.{token(name)}")
        await kv.delete(token(name))
        await kv.purge(tombstone_key(name))
        return True
    finally:
        await nc.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m purgatory_server._cluster.tombstone",
        description="Allow a deleted replicated purgatory's name to be served again.",
    )
    parser.add_argument("--nats", action="append", required=True, help="NATS URL (repeat)")
    parser.add_argument("command", choices=["revive"])
    parser.add_argument("name")
    args = parser.parse_args(argv)
    found = asyncio.run(revive(args.nats, args.name))
    sys.stdout.write(f"{args.name}: {'tombstone removed' if found else 'not deleted'}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
