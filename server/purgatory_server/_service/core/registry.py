"""The named purgatories of one server, created from config at start-up or by RPC.

Durable purgatories: the journal factory returns a :class:`Durability` for settings
with ``durable = true``; the registry builds the purgatory on its journal and event log,
has it restore the recovered operations before anyone can reach it, and closes (server
stop) or destroys (DeletePurgatory) it after the purgatory's engine has stopped.

A durable purgatory that cannot be opened at start-up because its data directory fails
(an ``OSError``: a full disk, a read-only or unreachable directory) does not stop the
server: :meth:`PurgatoryRegistry.open_or_retry` keeps its name answering UNAVAILABLE
(:class:`PurgatoryNotOpen`, naming the error) and tries again with a doubling delay
(``OPEN_RETRY_S`` up to ``OPEN_RETRY_MAX_S``), opening it once the directory allows.
Created by RPC, the same error is RESOURCE_EXHAUSTED for space and FAILED_PRECONDITION
otherwise.

Engine threads: the registry owns the server's one :class:`TimerReaper` (its reaper
thread and executor drive every purgatory's timing wheel), so a purgatory costs no thread
of its own; with ``reaper_enabled=False`` (tests that drive the clock by hand) each
purgatory keeps a private timer.

Thread safety: loop-confined like the purgatories it holds; the blocking steps (opening a
new durable purgatory's journal in :meth:`PurgatoryRegistry.create_async`, stopping the
reaper and closing journals) are pushed to worker threads so the loop keeps serving while
a purgatory is created or deleted or the server stops.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from purgatory_server._engine.reaper import TimerReaper
from purgatory_server._engine.time import Time
from purgatory_server._journal import JournalError
from purgatory_server._service.config.server_config import ConfigError, Limits, PurgatorySettings
from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.core.journal_hooks import JournalHooks
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.model.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    PurgatoryNotOpen,
    ServiceError,
    ShuttingDown,
)
from purgatory_server._service.model.quoting import quote
from purgatory_server._service.outcomes.event_log import EventLog
from purgatory_server._service.telemetry.counters import PurgatoryMetrics
from purgatory_server._service.telemetry.streams import SessionFigures

__all__ = ["PurgatoryRegistry"]

logger = logging.getLogger("purgatory_server.service")

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

# Start-up opening retried after a data directory error: first delay, doubling to the cap.
OPEN_RETRY_S = 0.5
OPEN_RETRY_MAX_S = 30.0
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _why(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or type(exc).__name__
    return f"{text} ({name})" if name else text


def _store_error(settings: PurgatorySettings, exc: OSError) -> ServiceError:
    """A data directory error creating ``settings`` (the server's state, not the
    request's): RESOURCE_EXHAUSTED when out of space, FAILED_PRECONDITION otherwise."""
    message = f"cannot store durable purgatory {settings.name!r} in the data directory: {_why(exc)}"
    if exc.errno in _NO_SPACE:
        return LimitExceeded(message)
    return FailedPrecondition(message)


class Durability(Protocol):
    """What a durable purgatory is built on (see :mod:`.local_store`)."""

    @property
    def journal(self) -> JournalHooks: ...

    @property
    def event_log(self) -> EventLog: ...

    @property
    def incarnation(self) -> str: ...

    def restore(self, purgatory: NamedPurgatory) -> None: ...

    def journal_bytes(self) -> int: ...

    def instrument(self, metrics: PurgatoryMetrics) -> None: ...

    async def close(self) -> None: ...

    async def destroy(self) -> None: ...


# Opens the durable store of a new purgatory; None keeps it in memory.
JournalFactory = Callable[[PurgatorySettings], Durability | None]
# (name, creating) -> None, or raises the routing error of a name served elsewhere (asked
# on every lookup, so that an owner whose lease lapsed answers nothing, reads included).
Router = Callable[[str, bool], None]


class PurgatoryRegistry:
    """Name -> :class:`NamedPurgatory`; loop-confined."""

    def __init__(
        self,
        limits: Limits,
        defaults: PurgatorySettings,
        loop: asyncio.AbstractEventLoop,
        *,
        time: Time | None = None,
        reaper_enabled: bool = True,
        journal_factory: JournalFactory | None = None,
        metrics: bool = False,
        traced: bool = False,
        router: Router | None = None,
    ) -> None:
        self.limits = limits
        # Observability (docs/observability.md): each purgatory gets its own counters.
        self._metrics = metrics
        self._traced = traced
        self.defaults = defaults
        self._loop = loop
        self._time = time
        self._reaper_enabled = reaper_enabled
        self._reaper = TimerReaper(time=time) if reaper_enabled else None
        # Names being created (their journal opening off the loop): they count toward
        # max_purgatories and cannot be created twice meanwhile.
        self._creating: set[str] = set()
        self._journal_factory = journal_factory
        self._purgatories: dict[str, NamedPurgatory] = {}
        self._durable: dict[str, Durability] = {}
        self._closed: ServiceError | None = None
        self.budget = ServerBudget(limits)  # logged once the server is up (app.log_limits)
        # Replicated purgatories: raises a routing error for a name this server does not
        # serve but knows the owner of; None without a cluster.
        self.router = router
        # Open Session streams and their cut-offs, for the metrics (telemetry/streams.py).
        self.sessions = SessionFigures()
        # Start-up purgatories whose data directory failed, and the tasks that retry
        # opening them (open_or_retry).
        # name -> (why, the delay to the next attempt; None: no more, see the log)
        self._unopened: dict[str, tuple[str, float | None]] = {}
        self._retries: dict[str, asyncio.Task[None]] = {}

    @property
    def reaper(self) -> TimerReaper | None:
        """The server's reaper (None with ``reaper_enabled=False``)."""
        return self._reaper

    def validate_name(self, name: str, field: str = "name") -> None:
        if not name:
            raise InvalidArgument(field, "must not be empty")
        if len(name) > self.limits.max_name_length:
            raise InvalidArgument(
                field, f"longer than max_name_length ({self.limits.max_name_length})"
            )
        if not NAME_PATTERN.fullmatch(name):
            raise InvalidArgument(field, "use letters, digits, '.', '_' and '-' only")

    def settings_for(self, name: str, overrides: PurgatorySettings | None) -> PurgatorySettings:
        """``overrides`` with zero fields taken from the server defaults."""
        base = replace(self.defaults, name=name)
        if overrides is None:
            return base
        return replace(overrides, name=name).over(base)

    def create(self, settings: PurgatorySettings) -> NamedPurgatory:
        """A new purgatory (start-up, a cluster takeover), its journal opened on this
        thread; a data directory error is RESOURCE_EXHAUSTED when out of space,
        FAILED_PRECONDITION otherwise."""
        try:
            return self._create(settings)
        except OSError as exc:
            raise _store_error(settings, exc) from exc

    async def create_async(self, settings: PurgatorySettings) -> NamedPurgatory:
        """:meth:`create` for CreatePurgatory: a durable one's journal is opened (files
        created, fsynced) on a worker thread, so the loop serves meanwhile; the name is
        reserved (and counted) until then."""
        factory = self._journal_factory
        if factory is None or not settings.durable:
            return self.create(settings)
        self._admit(settings)
        name = settings.name
        self._creating.add(name)
        try:
            store = await asyncio.to_thread(factory, settings)
        except OSError as exc:
            raise _store_error(settings, exc) from exc
        finally:
            self._creating.discard(name)
        if self._closed is not None:
            if store is not None:
                await store.close()
            raise self._closed
        return self._created(settings, self._build(settings, store))

    def open_or_retry(self, settings: PurgatorySettings) -> None:
        """Start-up: :meth:`create`, except that a data directory error leaves the name
        answering UNAVAILABLE while a task retries (module docstring). A name the limits
        refuse (``max_name_length`` lowered below an existing purgatory's) is a
        :class:`ConfigError` naming the purgatory: start-up stops, nothing is dropped."""
        try:
            self.validate_name(settings.name)
        except InvalidArgument as exc:
            raise ConfigError(
                f"purgatory {quote(settings.name)} ({len(settings.name)} characters): "
                f"{exc.problem}; raise max_name_length or delete the purgatory"
            ) from exc
        try:
            self._create(settings)
        except OSError as exc:
            self._defer(settings, exc, OPEN_RETRY_S)

    def _defer(self, settings: PurgatorySettings, exc: OSError, delay: float) -> None:
        name = settings.name
        self._unopened[name] = (_why(exc), delay)
        logger.error(
            "purgatory %s cannot be opened: %s; serving the others, trying again in %.1f s",
            name,
            _why(exc),
            delay,
        )
        self._retries[name] = self._loop.create_task(self._retry(settings, delay))

    async def _retry(self, settings: PurgatorySettings, delay: float) -> None:
        await asyncio.sleep(delay)
        if self._closed is not None:
            return
        name = settings.name
        del self._unopened[name], self._retries[name]
        try:
            self._create(settings)
        except OSError as exc:
            self._defer(settings, exc, min(2 * delay, OPEN_RETRY_MAX_S))
            return
        except ServiceError as exc:  # e.g. max_purgatories reached meanwhile
            logger.error("purgatory %s cannot be opened: %s", name, exc.message)
            return
        except JournalError as exc:  # corrupt, or records missing: the operator's call
            self._unopened[name] = (str(exc), None)
            logger.error("purgatory %s cannot be opened: %s", name, exc)
            return
        logger.info("purgatory %s opened after its data directory recovered", name)

    def _create(self, settings: PurgatorySettings) -> NamedPurgatory:
        """:meth:`create` with a data directory error raised as the ``OSError``."""
        self._admit(settings)
        store = None
        if self._journal_factory is not None:
            store = self._journal_factory(settings)  # OSError: see create, open_or_retry
        return self._created(settings, self._build(settings, store))

    def _admit(self, settings: PurgatorySettings) -> None:
        """Raise what refuses creating ``settings.name`` now (nothing is created)."""
        if self._closed is not None:
            raise self._closed
        self.validate_name(settings.name)
        if settings.name in self._purgatories or settings.name in self._creating:
            raise AlreadyExists(f"purgatory {settings.name!r} already exists")
        unopened = self._unopened.get(settings.name)
        if unopened is not None:
            raise PurgatoryNotOpen(settings.name, *unopened)
        if self.router is not None:
            self.router(settings.name, True)  # a replicated name: only its takeover creates it
        count = len(self._purgatories) + len(self._creating)
        if count >= self.limits.max_purgatories:
            raise LimitExceeded(
                f"{count} purgatories exist; max_purgatories is {self.limits.max_purgatories}"
            )

    def _created(self, settings: PurgatorySettings, purgatory: NamedPurgatory) -> NamedPurgatory:
        logger.info(
            "purgatory %s created (%s, max_pending %d, retained_events %d)",
            settings.name,
            "durable" if settings.durable else "in memory",
            settings.max_pending,
            settings.retained_events,
        )
        return purgatory

    def _build(self, settings: PurgatorySettings, store: Durability | None) -> NamedPurgatory:
        purgatory = NamedPurgatory(
            settings,
            self.limits,
            self._loop,
            time=self._time,
            journal=None if store is None else store.journal,
            event_log=None if store is None else store.event_log,
            reaper_enabled=self._reaper_enabled,
            reaper=self._reaper,
            incarnation=None if store is None else store.incarnation,
            budget=self.budget,
            metrics=self._new_metrics(store),
            traced=self._traced,
        )
        self._purgatories[settings.name] = purgatory
        if store is not None:
            self._durable[settings.name] = store
            if purgatory.metrics is not None:
                store.instrument(purgatory.metrics)
            store.restore(purgatory)
        return purgatory

    def _new_metrics(self, store: Durability | None) -> PurgatoryMetrics | None:
        """A purgatory's own counters (None with metrics off), measuring its store."""
        if not self._metrics:
            return None
        return PurgatoryMetrics(None if store is None else store.journal_bytes)

    def get(self, name: str, field: str = "purgatory") -> NamedPurgatory:
        if self._closed is not None:
            raise self._closed
        purgatory = self._purgatories.get(name)
        if purgatory is None:
            unopened = self._unopened.get(name)
            if unopened is not None:
                raise PurgatoryNotOpen(name, *unopened)
            # A name no purgatory can have is INVALID_ARGUMENT, as CreatePurgatory says.
            self.validate_name(name, field)
            if self.router is not None:
                self.router(name, False)
            raise NotFound(f"purgatory {quote(name)} not found", "purgatory", name)
        if self.router is not None:
            self.router(name, False)  # a replicated one: served only while its lease holds
        return purgatory

    def snapshot(self) -> list[NamedPurgatory]:
        """The purgatories now (any thread: one GIL-atomic copy; for exporters)."""
        return list(self._purgatories.values())

    def all_purgatories(self) -> list[NamedPurgatory]:
        if self._closed is not None:
            raise self._closed
        return [self._purgatories[n] for n in sorted(self._purgatories)]

    async def delete(self, name: str) -> int:
        """Cancel its pending operations, end its streams, stop its threads."""
        purgatory = self.get(name, "name")
        del self._purgatories[name]
        cancelled = purgatory.cancel_all()
        purgatory.account.close(0, 0)  # what it still holds (retained, signal data)
        purgatory.close(NotFound(f"purgatory {name!r} was deleted", "purgatory", name))
        await self._stop_engine(purgatory)
        store = self._durable.pop(name, None)
        if store is not None:
            await store.destroy()
        logger.info("purgatory %s deleted: %d pending operations cancelled", name, cancelled)
        return cancelled

    async def evict(self, name: str, error: ServiceError) -> None:
        """Stop serving ``name`` without ending its operations (another server of a
        replicated purgatory owns it now): waiting calls and streams end with ``error``,
        the store is closed."""
        purgatory = self._purgatories.pop(name, None)
        if purgatory is None:
            return
        # Its pending operations live on at the new owner: they leave this budget.
        ops = purgatory.pending_operations()
        purgatory.account.close(len(ops), sum(len(op.definition.payload) for op in ops))
        purgatory.close(error)
        await self._stop_engine(purgatory)
        store = self._durable.pop(name, None)
        if store is not None:
            await store.close()
        logger.info("purgatory %s evicted: %s", name, error.message)

    async def _stop_engine(self, purgatory: NamedPurgatory) -> None:
        """Stop its engine: at once on the shared reaper (it only detaches), on a worker
        thread for a private timer (it joins that timer's thread)."""
        if self._reaper is not None:
            purgatory.shutdown_engine()
        else:
            await asyncio.to_thread(purgatory.shutdown_engine)

    def begin_shutdown(self, error: ServiceError | None = None) -> None:
        """Refuse new work and end waiting long-polls and streams (UNAVAILABLE)."""
        error = error if error is not None else ShuttingDown()
        if self._closed is None:
            self._closed = error
        for task in self._retries.values():
            task.cancel()
        self._retries.clear()
        self._unopened.clear()
        for purgatory in self._purgatories.values():
            purgatory.close(error)

    async def shutdown(self) -> None:
        """:meth:`begin_shutdown`, then stop every purgatory's engine threads."""
        self.begin_shutdown()
        purgatories = list(self._purgatories.values())
        self._purgatories.clear()
        await asyncio.gather(*(self._stop_engine(p) for p in purgatories))
        stores = list(self._durable.values())
        self._durable.clear()
        await asyncio.gather(*(store.close() for store in stores))
        if self._reaper is not None:
            await asyncio.to_thread(self._reaper.shutdown)
