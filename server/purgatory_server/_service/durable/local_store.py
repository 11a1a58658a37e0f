"""Durable purgatories: the journal hooks, recovery at start-up, and the store's life cycle.

:class:`DurableHooks` implements the core's ``JournalHooks`` over the journal library.
Records produced during one loop iteration go to the journal as one submission at its
end, so concurrent RPCs share one write and, under ``always``, one fsync. ``barrier()``
resolves when the submission holding the latest record is written under the fsync
policy; submissions resolve in order, so that covers everything recorded before it.

Ordering: hooks run on the loop thread in the order the purgatory changes its state, and
the buffer keeps that order, which is the journal order (docs/journal.md).

Thread-safety: :class:`DurableHooks` and :class:`DurableStore` are loop-confined; the
journal writer's completions come back through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._engine.time import SYSTEM_TIME, Time
from purgatory_server._journal import (
    FsyncPolicy,
    JournalConfig,
    JournalError,
    JournalNoSpaceError,
    WriterPool,
)
from purgatory_server._journal import Journal as WriteAheadLog
from purgatory_server._service.config.server_config import PurgatorySettings, ServerConfig
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.durable.catalog import journal_dir, remove_purgatory, write_settings
from purgatory_server._service.durable.codec import (
    PendingDecoder,
    decode_outcome,
    outcome_record,
    registered_record,
    rescheduled_record,
    signal_record,
)
from purgatory_server._service.durable.downtime import rearm_order
from purgatory_server._service.durable.restored_groups import decode_groups
from purgatory_server._service.durable.schedule_records import deleted_record, upserted_record
from purgatory_server._service.durable.schedule_recovery import (
    restore_schedules,
    resume_schedules,
)
from purgatory_server._service.model.conditions import ConditionSpec, SignalRecord
from purgatory_server._service.model.definitions import OperationDefinition, RestoredOperation
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.event_log import EventLog
from purgatory_server._service.outcomes.incarnation import durable_incarnation
from purgatory_server._service.schedules.definition import ScheduleDefinition
from purgatory_server._service.telemetry.counters import PurgatoryMetrics
from purgatory_server._service.wire.convert import condition_to_proto

if TYPE_CHECKING:
    from purgatory_server._service.core.named_purgatory import NamedPurgatory

__all__ = ["DurableHooks", "DurableStore", "durable_factory"]

logger = logging.getLogger("purgatory_server.service")

# Operations re-armed per engine call at start-up: amortises the timer lock and clock
# reading, keeps the lists short-lived.
RESTORE_BATCH = 4096
# A recovery of at least this many pending operations freezes them out of the GC (restore).
FREEZE_AFTER = 10_000
# Writer threads all durable purgatories of a server share (each journal stays on one):
# fsyncs of different journals overlap up to this many at once.
JOURNAL_WRITER_THREADS = 4


class DurableHooks:
    """The journal hooks of one durable purgatory (loop-confined; see module docstring)."""

    def __init__(
        self, wal: WriteAheadLog, loop: asyncio.AbstractEventLoop, clock: Time = SYSTEM_TIME
    ) -> None:
        self._wal = wal
        self._loop = loop
        # The purgatory's clock (MockTime in tests): a signal record's time is its wall clock.
        self._clock = clock
        self._buffer: list[JournalRecord] = []
        self._batch: asyncio.Future[None] | None = None  # the buffered, unsubmitted batch
        self._last: asyncio.Future[None] | None = None  # the latest submitted batch
        self._conditions: dict[ConditionSpec, tuple[Any, bytes]] = {}

    @property
    def no_space(self) -> str | None:
        """Why the journal is stalled out of space (None: it writes); written by its
        writer thread, read here without a lock (one attribute)."""
        return self._wal.no_space

    # -- hooks (loop thread) -----------------------------------------------------------
    def _condition(self, spec: ConditionSpec) -> tuple[Any, bytes]:
        cached = self._conditions.get(spec)
        if cached is None:
            msg = condition_to_proto(spec)
            cached = (msg, msg.SerializeToString())
            if len(self._conditions) < 10_000:
                self._conditions[spec] = cached
        return cached

    def on_registered(self, purgatory: str, operation: RemoteOperation) -> None:
        definition = operation.definition
        raw = self._condition(definition.condition)[1]
        self._record(registered_record(purgatory, operation, raw))

    def on_signal(self, purgatory: str, key: str, signal: SignalRecord) -> None:
        self._record(signal_record(purgatory, key, signal, self._clock.wall_clock_ms()))

    def on_outcome(self, purgatory: str, outcome: Outcome, definition: OperationDefinition) -> None:
        # The definition comes with the outcome, so no pending id -> definition map is kept.
        condition = self._condition(definition.condition)[0]
        self._record(
            outcome_record(outcome, condition, definition.timeout_ms, definition.due_time_ms)
        )

    def on_rescheduled(self, purgatory: str, operation_id: str, due_time_ms: int) -> None:
        self._record(rescheduled_record(purgatory, operation_id, due_time_ms))

    def on_schedule_upserted(
        self, purgatory: str, definition: ScheduleDefinition, now_ms: int
    ) -> None:
        self._record(upserted_record(purgatory, definition, now_ms))

    def on_schedule_deleted(self, purgatory: str, schedule_id: str, now_ms: int) -> None:
        self._record(deleted_record(purgatory, schedule_id, now_ms))

    def on_group(self, record: JournalRecord) -> None:
        self._record(record)

    async def barrier(self) -> None:
        future = self._batch if self._batch is not None else self._last
        if future is None:
            return
        if future.done():
            future.result()  # raises if the write failed
            return
        await asyncio.shield(future)

    def after_write(
        self, callback: Callable[[], None], failed: Callable[[BaseException], None]
    ) -> None:
        future = self._batch if self._batch is not None else self._last
        if future is None:
            callback()
            return

        def run(done: asyncio.Future[None]) -> None:
            if done.cancelled():
                failed(asyncio.CancelledError("journal write abandoned"))
                return
            exc = done.exception()
            if exc is None:
                callback()
            else:
                failed(exc)

        future.add_done_callback(run)

    # -- batching -------------------------------------------------------------------------
    def _record(self, record: JournalRecord) -> None:
        self._buffer.append(record)
        if self._batch is None:
            self._batch = self._loop.create_future()
            self._loop.call_soon(self._submit)

    def _submit(self) -> None:
        batch = self._batch
        if batch is None:
            return
        records, self._buffer = self._buffer, []
        self._batch = None
        self._last = batch
        try:
            written = self._wal.submit(records)
        except JournalError as exc:
            logger.error(
                "journal %s refused %d records: %s", self._wal.directory, len(records), exc
            )
            batch.set_exception(exc)
            return
        loop = self._loop

        def done(f: Future[int]) -> None:
            # A closed loop means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, batch, f)

        written.add_done_callback(done)

    async def close(self) -> None:
        """Submit what is buffered, then close the journal (flushes and fsyncs)."""
        self._submit()
        await asyncio.to_thread(self._wal.close)


def _resolve(batch: asyncio.Future[None], written: Future[int]) -> None:
    exc = written.exception()
    if batch.done():
        return
    if exc is not None:
        logger.error("journal write failed: %s", exc)
        batch.set_exception(exc)
    else:
        batch.set_result(None)


class DurableStore:
    """One durable purgatory's journal, its recovered state and its directory.

    Built by :func:`durable_factory` when the registry creates a durable purgatory; the
    registry then calls :meth:`restore` on the new purgatory before it serves, and
    :meth:`close` (server stop) or :meth:`destroy` (DeletePurgatory) at the end.
    """

    def __init__(
        self,
        data_dir: Path,
        settings: PurgatorySettings,
        wal: WriteAheadLog,
        loop: asyncio.AbstractEventLoop,
        incarnation: str,
        *,
        clock: Time = SYSTEM_TIME,
    ) -> None:
        self._data_dir = data_dir
        # Kept beside the settings: the journal's sequences and this id live and die together.
        self.incarnation = incarnation
        self._settings = settings
        self._wal = wal
        self._loop = loop
        self.journal = DurableHooks(wal, loop, clock)
        self.event_log = self._event_log()

    def _event_log(self) -> EventLog:
        recovered = self._wal.recovered
        last = recovered.last_sequence
        events = [decode_outcome(record)[1] for record in recovered.events]
        # The window must be consecutive and end at last_sequence; keep the longest tail
        # that is (compaction may have dropped outcomes a checkpoint still counts).
        tail: list[Outcome] = []
        expected = last
        for event in reversed(events):
            if event.sequence != expected:
                break
            tail.append(event)
            expected -= 1
        tail.reverse()
        if len(tail) != len(events):
            logger.warning(
                "purgatory %s: restored %d of %d retained events (sequence gap)",
                self._settings.name,
                len(tail),
                len(events),
            )
        return EventLog(self._settings.retained_events, last_sequence=last, events=tail)

    def restore(self, purgatory: NamedPurgatory) -> None:
        """Rebuild key values, finished ids and pending operations (loop thread)."""
        # Re-arming allocates many long-lived objects and no garbage cycles: no GC meanwhile.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            restored = self._restore(purgatory)
            self._wal.release_recovered()
            if restored >= FREEZE_AFTER:
                # Long-lived by nature: out of the collector's view (refcounting still
                # frees each one when its operation ends).
                gc.freeze()
        finally:
            if gc_was_enabled:
                gc.enable()

    def _restore(self, purgatory: NamedPurgatory) -> int:
        recovered = self._wal.recovered
        started = time.monotonic()
        for key, value in recovered.key_values.items():
            purgatory.restore_value(key, value)
        for record in recovered.finished:  # the event window and the dedup window
            definition, outcome = decode_outcome(record)
            purgatory.restore_finished(definition, outcome)
        restore_schedules(purgatory, recovered.schedules.values())
        decode = PendingDecoder()
        batch: list[RestoredOperation] = []
        order = rearm_order(recovered.pending, purgatory.wall_clock_ms(), self._settings.tick_ms)
        for op_id, pending in order:  # late ones first, in due-time order (.downtime)
            definition, created, due, signals = decode(pending)
            batch.append((op_id, definition, created, due, signals))
            if len(batch) == RESTORE_BATCH:
                purgatory.restore_operations(batch)
                batch = []
        if batch:
            purgatory.restore_operations(batch)
        resume_schedules(purgatory, recovered.pending)
        if recovered.groups:
            purgatory.groups.restore(decode_groups(recovered.groups))
        logger.info(
            "purgatory %s recovered from %s: %d pending, %d key values, last sequence %d "
            "(%.2fs to re-arm)",
            self._settings.name,
            self._wal.directory,
            len(recovered.pending),
            len(recovered.key_values),
            recovered.last_sequence,
            time.monotonic() - started,
        )
        return len(recovered.pending)

    def journal_bytes(self) -> int:
        """The journal's size on disk (any thread: the metrics exporter's)."""
        return sum(segment.size for segment in self._wal.segments())

    def instrument(self, metrics: PurgatoryMetrics) -> None:
        """Report fsync latency and group size to ``metrics`` (the journal's fsync hook)."""
        self._wal.add_fsync_listener(metrics.on_fsync)

    async def close(self) -> None:
        await self.journal.close()

    async def destroy(self) -> None:
        """Close the journal and delete the purgatory's directory (DeletePurgatory)."""
        await self.journal.close()
        await asyncio.to_thread(remove_purgatory, self._data_dir, self._settings.name)


def journal_config(config: ServerConfig, settings: PurgatorySettings) -> JournalConfig:
    """The server-wide fsync policy, overridden per purgatory where set."""
    return JournalConfig(
        fsync=FsyncPolicy(settings.fsync or config.fsync),
        fsync_interval_ms=settings.fsync_interval_ms or config.fsync_interval_ms,
        retain_events=settings.retained_events,
        max_key_values=config.limits.max_tracked_values,
        dedup_window_ms=settings.dedup_window_ms,
        dedup_max_bytes=settings.dedup_max_bytes,
    )


def durable_factory(
    config: ServerConfig,
    loop: asyncio.AbstractEventLoop,
    clock: Time | None = None,
    *,
    write: Callable[[int, memoryview], int] = os.write,
) -> Callable[[PurgatorySettings], DurableStore | None]:
    """The registry's journal factory: a :class:`DurableStore` for durable settings.

    Opening recovers the journal (blocking: at start-up, or on a worker thread for
    CreatePurgatory of a new and therefore empty journal; any thread) and raises
    :class:`JournalCorruptionError` for a corrupt mid-file record or missing records
    (:class:`JournalGapError`) unless ``config.repair_journal``, and ``OSError`` when
    the data directory fails (out of space included). ``write`` is the journals'
    ``os.write`` (a test makes it run out of space; ``create_server(journal_factory=...)``
    takes the factory). Every journal's writes run on the factory's one
    :class:`WriterPool` (``JOURNAL_WRITER_THREADS`` threads).
    """
    data_dir = Path(config.data_dir)
    store_clock = clock if clock is not None else SYSTEM_TIME
    # The server's journal writers (their threads run only while a journal is open).
    writers = WriterPool(JOURNAL_WRITER_THREADS)

    def open_store(settings: PurgatorySettings) -> DurableStore | None:
        if not settings.durable:
            return None
        data_dir.mkdir(parents=True, exist_ok=True)
        write_settings(data_dir, settings)
        incarnation = durable_incarnation(data_dir / settings.name)
        try:
            wal = WriteAheadLog.open(
                journal_dir(data_dir, settings.name),
                journal_config(config, settings),
                repair=config.repair_journal,
                writers=writers,
                _write=write,
            )
        except JournalNoSpaceError as exc:  # its first segment: a data directory error
            raise OSError(exc.errno, str(exc)) from exc
        try:
            return DurableStore(data_dir, settings, wal, loop, incarnation, clock=store_clock)
        except BaseException:
            wal.close()
            raise

    return open_store
