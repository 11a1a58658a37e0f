"""Cluster membership: which servers are live, where they listen, what they can serve.

docs/scale-out.md, "Placement over several servers". Every server keeps one key in KV
bucket ``purgatory-members`` (TTL = the lease): its server id (hex-encoded, since ids may
hold ``:``) → its id, advertised address and the replicated purgatories it names. It
rewrites the key every ``lease / 3`` with a plain put (membership is advisory: ownership
rests on the lease keys and the append fence, never on this), and deletes it on a graceful
stop, so the others re-rank at once instead of after a TTL.

Each server follows the bucket with one KV watch. A watch does not report a key that
aged out, so liveness is judged on this server's monotonic clock: a member is live while
its key was last seen rewritten less than one lease ago. ``since`` is when this server saw
the member become live; placement hands over only to a member live for a while
(:class:`~.placement.Placement`). Members seen when the watch starts count as live since
then, which only delays a hand-over, never hastens one. A watch silent for a lease (it
shows this server's own renewals too) is stuck and is started again. If the view is lost
altogether, placement degrades to first-come, never to an unowned purgatory.

Thread-safety: loop-confined (the server's event loop); the watch callback runs there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import nats.errors

from purgatory_server._cluster.placement import Member, Placement, ranked

__all__ = ["Membership", "join", "member_key"]

logger = logging.getLogger("purgatory_server.cluster")

_FORGET_AFTER_LEASES = 10  # drop a lapsed member from memory after this many leases


def member_key(server_id: str) -> str:
    """The KV key of a server id (hex: ids such as ``host:port`` hold invalid characters)."""
    return "m" + server_id.encode("utf-8").hex()


def _encode(member: Member) -> bytes:
    return json.dumps(
        {
            "server_id": member.server_id,
            "address": member.address,
            "purgatories": sorted(member.purgatories),
        }
    ).encode()


def _decode(raw: bytes | None) -> tuple[str, str, frozenset[str]] | None:
    try:
        data = json.loads(raw or b"")
        names = data["purgatories"]
        if not isinstance(names, list):
            return None
        return str(data["server_id"]), str(data["address"]), frozenset(str(n) for n in names)
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(slots=True)
class _Seen:
    member: Member
    last_seen: float


class Membership:
    """This server's key in the members bucket and its view of the others."""

    def __init__(
        self,
        kv: Any,
        server_id: str,
        address: str,
        purgatories: Iterable[str],
        *,
        lease_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kv = kv
        self._clock = clock
        self._lease_s = lease_s
        self._me = Member(server_id, address, frozenset(purgatories), clock())
        self._key = member_key(server_id)
        self._seen: dict[str, _Seen] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._watcher: Any = None

    @property
    def me(self) -> Member:
        return self._me

    # -- the view ------------------------------------------------------------------------
    def live(self) -> list[Member]:
        """Members live now; this server always (it knows it is alive)."""
        now = self._clock()
        out = [self._me]
        for server_id, seen in list(self._seen.items()):
            age = now - seen.last_seen
            if server_id == self._me.server_id:
                continue
            if age <= self._lease_s:
                out.append(seen.member)
            elif age > _FORGET_AFTER_LEASES * self._lease_s:
                del self._seen[server_id]
        return out

    def candidate(self, purgatory: str) -> str:
        """The address of the member that should own ``purgatory`` if this server does
        not (placement's rank over members seen lately, lapsed ones included: a server
        cut off from NATS stops seeing renewals, not members), or ""."""
        others = {
            sid: seen.member.address
            for sid, seen in self._seen.items()
            if sid != self._me.server_id and purgatory in seen.member.purgatories
        }
        return others[ranked(purgatory, others)[0]] if others else ""

    def observe(self, raw: bytes | None, deleted: bool, key: str = "") -> None:
        """Apply one watched entry (a put, or a delete/purge of ``key``)."""
        if deleted:
            for server_id in [s for s in self._seen if member_key(s) == key]:
                del self._seen[server_id]
            return
        decoded = _decode(raw)
        if decoded is None:
            return
        server_id, address, purgatories = decoded
        now = self._clock()
        seen = self._seen.get(server_id)
        lapsed = seen is None or now - seen.last_seen > self._lease_s
        since = now if lapsed or seen is None else seen.member.since  # (re)joined: starts over
        self._seen[server_id] = _Seen(Member(server_id, address, purgatories, since), now)

    # -- life cycle ----------------------------------------------------------------------
    async def start(self, initial_timeout_s: float = 5.0) -> None:
        """Write this server's key, read the current members, then keep both up to date.

        Retried until it succeeds (a bucket created a moment ago may have no leader yet);
        the caller bounds the wait.
        """
        await _until_done(lambda: self._kv.put(self._key, _encode(self._me)))
        await self._watch(initial_timeout_s)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._renew()), loop.create_task(self._follow())]

    async def _watch(self, initial_timeout_s: float) -> None:
        """(Re)start the watch and apply the current keys (until the "no more" marker)."""
        if self._watcher is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._watcher.stop(), 2.0)
        self._watcher = await _until_done(self._kv.watchall)
        deadline = self._clock() + initial_timeout_s
        while self._clock() < deadline:
            try:
                entry = await self._watcher.updates(max(0.01, deadline - self._clock()))
            except nats.errors.TimeoutError:
                break
            if entry is None:
                break
            self._apply(entry)

    async def stop(self) -> None:
        """Stop renewing and delete this server's key (the others re-rank at once)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._watcher is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._watcher.stop(), 2.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._kv.delete(self._key), 2.0)

    def _apply(self, entry: Any) -> None:
        deleted = entry.operation in ("DEL", "PURGE")
        self.observe(entry.value, deleted, str(entry.key))

    async def _renew(self) -> None:
        interval = self._lease_s / 3
        while True:
            await asyncio.sleep(interval)
            try:
                async with asyncio.timeout(interval):
                    await self._kv.put(self._key, _encode(self._me))
            except (TimeoutError, nats.errors.Error, OSError) as exc:
                logger.warning("cluster: membership renewal failed: %s", exc)

    async def _follow(self) -> None:
        while True:
            try:
                entry = await self._watcher.updates(self._lease_s)
            except nats.errors.TimeoutError:
                # A lease of silence (our own key is rewritten every lease / 3): the watch
                # is stuck. A new one re-reads every key.
                logger.warning("cluster: membership watch silent for a lease; restarting it")
                await self._watch(self._lease_s)
                continue
            if hasattr(entry, "operation"):  # not the "initial values done" marker
                self._apply(entry)


async def _until_done(call: Callable[[], Awaitable[Any]], pause_s: float = 0.1) -> Any:
    """``call()`` until it does not fail with a NATS or network error."""
    while True:
        try:
            return await call()
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            logger.info("cluster: membership: %s; retrying", exc)
        await asyncio.sleep(pause_s)


async def join(
    kv: Any, server_id: str, address: str, purgatories: Iterable[str], lease_s: float
) -> tuple[Membership, Placement]:
    """Become a member (key written, current members read) and the placement over them.

    A standby that is not the preferred member waits half a lease for the preferred one to
    acquire an absent key (five of its polls); an owner hands over no sooner than a lease
    after its takeover, and only to a member live for two leases (no flapping).
    """
    membership = Membership(kv, server_id, address, purgatories, lease_s=lease_s)
    await membership.start()
    placement = Placement(
        membership, server_id, grace_s=lease_s / 2, hold_s=lease_s, settle_s=2 * lease_s
    )
    return membership, placement
