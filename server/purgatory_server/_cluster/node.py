"""One server's part in a replicated deployment: owner or standby of each replicated purgatory.

docs/scale-out.md (ownership and fencing, standbys, routing). For every purgatory named
in ``[cluster] replicated`` a task runs this cycle for the life of the server:

1. **standby**: tail the subject into a :class:`~.shadow.Shadow`; poll the lease key
   every ``lease / 10``, remembering its holder (routing); once it is absent, create it:
   at once if placement (``placement.py``) prefers this server or its own lease lapsed
   with the bucket out of reach (:mod:`.holder`), after a grace period otherwise or when
   the bucket did not answer meanwhile (its old owner gets it back first);
2. **takeover** (the key was created here; its revision is the new epoch): append the
   *fence* once the shadow holds everything before it (:mod:`.takeover`), so no append of
   the old owner can succeed any more; then build the purgatory from the shadow's state
   through the registry (same restore code as a local restart: timers re-armed at their
   original due times, overdue ones expire at once);
3. **owner**: hold the lease (:mod:`.holder`: renewals retried within the lease); once it
   is lost, or an append fenced/failed, evict the purgatory (its waiting calls end
   UNAVAILABLE naming the new owner when known), release the key if still ours, go back
   to 1. A hand-over to a member placement prefers goes the same way, after the last
   append's ack, naming that member; it acquires at once.

A purgatory deleted by DeletePurgatory is neither stood by nor owned while its tombstone
stands (:mod:`.tombstone`). :meth:`route` refuses what this server does not serve now
(:class:`~.errors.NotOwner`: UNAVAILABLE + ``purgatory-owner``).

Thread-safety: loop-confined (the server's event loop); NATS callbacks run there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import nats
import nats.errors
from nats.js.errors import KeyNotFoundError

from purgatory_server._cluster.holder import Holding, hold
from purgatory_server._cluster.jetstream_setup import SETUP_TIMEOUT_S, ensure_layout, ensure_members
from purgatory_server._cluster.key_view import KeyView
from purgatory_server._cluster.layout import journal_stream, journal_subject, token
from purgatory_server._cluster.log import ReplicatedLog
from purgatory_server._cluster.membership import Membership, join
from purgatory_server._cluster.owner_lease import LeaseValue, OwnerLease
from purgatory_server._cluster.placement import Placement
from purgatory_server._cluster.shadow import Shadow
from purgatory_server._cluster.snapshot import SnapshotPolicy
from purgatory_server._cluster.store import ReplicatedStore
from purgatory_server._cluster.takeover import claim_incarnation, fence
from purgatory_server._cluster.tombstone import Buried, Tombstones
from purgatory_server._engine.time import SYSTEM_TIME, Time
from purgatory_server._service.config.server_config import PurgatorySettings, ServerConfig
from purgatory_server._service.model.errors import NotOwner, PurgatoryDeleted, RecreateRefused

if TYPE_CHECKING:
    from purgatory_server._service.core.registry import (
        Durability,
        JournalFactory,
        PurgatoryRegistry,
    )

__all__ = ["ClusterNode"]

logger = logging.getLogger("purgatory_server.cluster")


@dataclass(slots=True)
class _Route:
    address: str
    epoch: int


class ClusterNode:
    """Owner/standby cycles of this server's replicated purgatories (see module docstring)."""

    def __init__(
        self, config: ServerConfig, loop: asyncio.AbstractEventLoop, clock: Time | None = None
    ) -> None:
        self._config = config
        self._cluster = config.cluster
        self._loop = loop
        self._clock = clock if clock is not None else SYSTEM_TIME
        self._lease_s = self._cluster.lease_ms / 1000.0
        self._settings = {
            p.name: p for p in config.purgatories if p.name in set(self._cluster.replicated)
        }
        self._prepared: dict[str, ReplicatedStore] = {}
        self._routes: dict[str, _Route] = {}
        self._logs: dict[str, ReplicatedLog] = {}
        self._leases: dict[str, OwnerLease] = {}
        self._lost: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._nc: Any = None
        self._js: Any = None
        self._owners_kv: Any = None
        self._meta_kv: Any = None
        self._membership: Membership | None = None
        self._placement: Placement | None = None
        self._lapsed: set[str] = set()  # leases lapsed here, bucket out of reach (holder.py)
        self._views: dict[str, KeyView] = {}  # what the standby saw of each lease key
        self._tombstones: Tombstones | None = None  # deleted purgatories (tombstone.py)
        self.address = ""
        self.server_id = ""

    # -- hooks the app installs --------------------------------------------------------
    def is_replicated(self, name: str) -> bool:
        return name in self._settings

    def wrap_factory(self, inner: JournalFactory) -> JournalFactory:
        """The registry's journal factory: prepared replicated stores first."""

        def factory(settings: PurgatorySettings) -> Durability | None:
            store = self._prepared.pop(settings.name, None)
            if store is not None:
                return store
            return inner(settings)

        return factory

    def route(self, name: str, creating: bool = False) -> None:
        """Raise NotOwner for a replicated purgatory this server does not serve now.

        The registry asks before creating a name (so a replicated name is created here only
        by a takeover) and on every lookup, so an owned purgatory is served, reads
        included, only while its lease is valid: past it another owner may have written.
        Then the answer is UNAVAILABLE naming the last owner seen other than this server,
        else the member that should own it next, until renewal or eviction.
        """
        if name in self._settings and name not in self._prepared:
            lease = self._leases.get(name)
            if lease is not None and name in self._logs and lease.valid():
                return  # owned, and nobody else can hold it yet
            if self._tombstones is not None and name in self._tombstones.deleted:
                raise RecreateRefused(name) if creating else PurgatoryDeleted(name)
            known = self._routes.get(name)
            if known is None or known.address == self.address:  # the next candidate, if any
                raise NotOwner(name, self._membership.candidate(name) if self._membership else "")
            raise NotOwner(name, known.address, known.epoch)

    def elsewhere(self) -> list[tuple[str, str]]:
        """The replicated purgatories this server does not serve now, sorted, each with the
        address of its owner as far as this server knows ("" while a new owner is being
        chosen): the whole-cluster listing asks those owners for theirs. Deleted ones are
        left out."""
        out: list[tuple[str, str]] = []
        for name in sorted(self._settings):
            try:
                self.route(name)
            except NotOwner as exc:
                out.append((name, "" if exc.owner == self.address else exc.owner))
            except PurgatoryDeleted:
                continue
        return out

    def owner(self, name: str) -> str:
        """Another server's address that owns ``name`` as far as this one knows, or ""."""
        known = self._routes.get(name)
        return "" if known is None or known.address == self.address else known.address

    # -- life cycle ----------------------------------------------------------------------
    async def start(self, registry: PurgatoryRegistry, port: int) -> None:
        """Connect, create the streams and buckets if needed, start the cycles (each takes
        over and gives up its purgatory in ``registry``)."""
        cluster = self._cluster
        host = self._config.listen.rsplit(":", 1)[0]
        self.address = cluster.advertise or f"{host}:{port}"
        self.server_id = cluster.server_id or self.address
        self._nc = await nats.connect(
            servers=list(cluster.nats_urls),
            name=f"purgatory {self.server_id}",
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            connect_timeout=5,
        )
        self._js = self._nc.jetstream(timeout=5)
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            self._owners_kv, self._meta_kv, self._lease_s = await ensure_layout(
                self._js, cluster, self._lease_s
            )
            members_kv = await ensure_members(self._js, cluster, self._lease_s)
            self._membership, self._placement = await join(
                members_kv, self.server_id, self.address, self._settings, self._lease_s
            )
        self._tombstones = Tombstones(self._js, self._meta_kv, cluster.journal_streams)
        await self._tombstones.load(self._settings, SETUP_TIMEOUT_S)  # deleted stays deleted
        for name in self._settings:
            await self._learn_owner(name)  # route from the first request on
            self._lost[name] = asyncio.Event()
            self._tasks.append(self._loop.create_task(self._cycle(name, registry)))
        logger.info(
            "cluster: %s (%s) serves replicated purgatories %s on %s",
            self.server_id,
            self.address,
            ", ".join(self._settings) or "(none)",
            ",".join(cluster.nats_urls),
        )

    def begin_stop(self) -> None:
        """Stop the cycles (no more takeovers); owned purgatories keep their leases."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()

    async def stop(self) -> None:
        """After the registry closed (logs drained): release leases, disconnect."""
        self.begin_stop()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._membership is not None:  # first, so the others re-rank without us
            await self._membership.stop()
        for lease in list(self._leases.values()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(lease.release(), 2.0)
        self._leases.clear()
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.close(), 5.0)

    # -- the cycle -------------------------------------------------------------------------
    async def _cycle(self, name: str, registry: PurgatoryRegistry) -> None:
        while not self._stopping:
            try:
                await self._one_cycle(name, registry)
            except asyncio.CancelledError:
                raise
            except Buried:
                continue  # deleted: the next cycle waits while the tombstone stays
            except Exception:
                logger.exception("cluster: purgatory %s: cycle failed; retrying", name)
                if name in self._views:  # NATS failed us: as good as an unanswered read
                    self._views[name].unreachable()
                await asyncio.sleep(min(1.0, self._lease_s / 3))

    async def _one_cycle(self, name: str, registry: PurgatoryRegistry) -> None:
        settings = self._settings[name]
        limits = self._config.limits
        stream = journal_stream(name, self._cluster.journal_streams)
        subject = journal_subject(name, self._cluster.journal_streams)
        await self._tomb().wait_alive(name, min(0.5, max(0.02, self._lease_s / 10)))
        dedup = (settings.dedup_window_ms, settings.dedup_max_bytes)
        shadow = Shadow(
            self._js,
            stream,
            subject,
            settings.retained_events,
            limits.max_tracked_values,
            dedup=dedup,
        )
        lease = OwnerLease(
            self._owners_kv, token(name), LeaseValue(self.server_id, self.address), self._lease_s
        )
        await shadow.start()
        try:
            await self._stand_by(name, lease)
            try:
                log = await self._take_over(
                    name, registry, settings, stream, subject, shadow, lease
                )
            except BaseException:
                self._leases.pop(name, None)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(lease.release(), 2.0)
                raise
        finally:
            await shadow.stop()
        assert self._placement is not None
        holding = Holding()
        try:
            holding = await hold(name, lease, log, self._lost[name], self._placement, self._lease_s)
        finally:
            await self._evict(name, registry, lease, log, holding)

    async def _learn_owner(self, name: str) -> LeaseValue | None:
        """Read the lease key; remember its holder as the route (None: nobody holds it)."""
        try:
            entry = await self._owners_kv.get(token(name))
            value = LeaseValue.decode(entry.value)
        except KeyNotFoundError:
            value = None
        if value is None:
            if self._routes.get(name, _Route("", 1)).epoch != 0:  # keep a hand-over's hint
                self._routes.pop(name, None)  # expired: do not send clients to a dead owner
        else:
            self._routes[name] = _Route(value.address, int(entry.revision or 0))
        return value

    async def _stand_by(self, name: str, lease: OwnerLease) -> None:
        poll = min(0.5, max(0.02, self._lease_s / 10))
        placement = self._placement
        assert placement is not None
        view = self._views.get(name)  # kept across cycles: it remembers an outage
        if view is None:
            view = self._views[name] = KeyView(placement, self._lease_s, self.server_id)
        view.lapsed(name in self._lapsed)
        while True:
            await self._tomb().ensure_alive(name, leader=False)  # Buried: stop standing by
            try:
                holder = await self._learn_owner(name)
            except (TimeoutError, nats.errors.Error, OSError):
                view.unreachable()  # e.g. its JetStream leader is being elected
                holder = LeaseValue("", "")
            if holder is None:
                if view.absent(name) and await lease.try_acquire():
                    return  # (still "lapsed" until the takeover is done)
            elif holder.server_id:
                view.held(holder.server_id, self._routes[name].epoch)
                if holder.server_id != self.server_id:
                    self._lapsed.discard(name)
            await asyncio.sleep(poll)

    async def _take_over(  # noqa: PLR0917 - one call site, names kept apart
        self,
        name: str,
        registry: PurgatoryRegistry,
        settings: PurgatorySettings,
        stream: str,
        subject: str,
        shadow: Shadow,
        lease: OwnerLease,
    ) -> ReplicatedLog:
        started = self._loop.time()
        self._leases[name] = lease
        await self._tomb().ensure_alive(name)  # re-read at the KV leader once we hold it
        epoch = lease.epoch
        fence_seq = await fence(self._js, name, stream, subject, shadow, lease, self._lease_s)
        recovered = shadow.snapshot()
        incarnation = await claim_incarnation(self._meta_kv, name)
        lost = self._lost[name]
        lost.clear()
        log = ReplicatedLog(
            self._js,
            name=name,
            stream=stream,
            subject=subject,
            msg_id_prefix=token(name),
            epoch=epoch,
            last_sequence=fence_seq,
            recovered=recovered,
            loop=self._loop,
            lease_valid=lease.valid,
            on_lost=lambda _reason: lost.set(),
            not_owner=lambda: NotOwner(name, self.owner(name)),
            append_timeout_s=self._cluster.append_timeout_ms / 1000.0,
            replay=shadow.handover(),
            snapshot_policy=SnapshotPolicy(
                self._cluster.snapshot_messages, self._cluster.snapshot_bytes
            ),
        )
        self._logs[name] = log
        store = ReplicatedStore(
            settings,
            log,
            self._loop,
            incarnation,
            clock=self._clock,
            on_destroy=lambda: self._tomb().bury_owned(name, incarnation, log),
        )
        self._prepared[name] = store
        self._routes[name] = _Route(self.address, epoch)
        try:
            registry.create(registry.settings_for(name, settings))
        finally:
            self._prepared.pop(name, None)
        self._lapsed.discard(name)
        logger.info(
            "cluster: %s owns purgatory %s (epoch %d, fence at %d, %d pending, %d messages "
            "tailed, %.3fs takeover)",
            self.server_id,
            name,
            epoch,
            fence_seq,
            len(recovered.pending),
            shadow.messages,
            self._loop.time() - started,
        )
        return log

    def _tomb(self) -> Tombstones:
        assert self._tombstones is not None  # set by start()
        return self._tombstones

    async def _evict(
        self,
        name: str,
        registry: PurgatoryRegistry,
        lease: OwnerLease,
        log: ReplicatedLog,
        holding: Holding,
    ) -> None:
        if self._stopping:
            return  # server shutdown: the registry closes the store, stop() releases
        log.fence("stopping")
        target = holding.hand_over_to
        if holding.lapsed:  # the bucket was out of reach: acquire first once it is back
            self._lapsed.add(name)
        if target is not None:  # a hand-over: its last append is acknowledged first
            await log.drain(self._lease_s)
        self._logs.pop(name, None)
        self._leases.pop(name, None)
        if self._routes.get(name, _Route("", 0)).address == self.address:
            del self._routes[name]
        if target is not None:  # until its lease key names it (epoch unknown yet)
            self._routes[name] = _Route(target.address, 0)
        await registry.evict(name, NotOwner(name, self.owner(name)))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(lease.release(), 2.0)
        logger.warning(
            "cluster: %s no longer owns purgatory %s: %s", self.server_id, name, log.lost
        )
