"""The durable store of an owned replicated purgatory: the local store over the stream.

:class:`ReplicatedStore` is the service's :class:`~.._service.durable.DurableStore`
(journal hooks, event-log and pending-operation restore) built on a
:class:`~.log.ReplicatedLog` instead of a local write-ahead log, so a takeover rebuilds
a purgatory with exactly the code a local restart uses: key values, finished ids, pending
operations with their progress re-armed at their original due wall times (overdue ones
expire at once), the event sequence and retained window.

Thread-safety: as DurableStore (loop-confined).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

from purgatory_server._cluster.log import ReplicatedLog
from purgatory_server._engine.time import SYSTEM_TIME, Time
from purgatory_server._journal import Journal as WriteAheadLog
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.durable.local_store import DurableStore
from purgatory_server._service.telemetry.counters import PurgatoryMetrics

__all__ = ["ReplicatedStore"]


class ReplicatedStore(DurableStore):
    """A DurableStore whose records go to JetStream (see module docstring)."""

    def __init__(
        self,
        settings: PurgatorySettings,
        log: ReplicatedLog,
        loop: asyncio.AbstractEventLoop,
        incarnation: str,
        *,
        clock: Time = SYSTEM_TIME,
        on_destroy: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        # The log has the writer's shape (submit/close/recovered/directory); no data_dir.
        super().__init__(Path(), settings, cast(WriteAheadLog, log), loop, incarnation, clock=clock)
        self.log = log
        # DeletePurgatory: records the deletion cluster-wide (node.py -> tombstone.py).
        self._on_destroy = on_destroy

    def journal_bytes(self) -> int:
        """Bytes this owner appended to the stream (its journal size here)."""
        return self.log.bytes_appended

    def instrument(self, metrics: PurgatoryMetrics) -> None:
        """Append latency and records per append as the fsync metrics."""
        self.log.add_fsync_listener(metrics.on_fsync)

    async def destroy(self) -> None:
        """DeletePurgatory: append what is buffered (the CANCELLED outcomes), then bury
        the purgatory cluster-wide (:mod:`.tombstone`) before the RPC answers."""
        await self.close()
        if self._on_destroy is not None:
            await self._on_destroy()
