"""Snapshots of one purgatory: for the admin RPCs (loop thread) and exporters (any thread)."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from purgatory_server._service.config.server_config import PurgatorySettings

if TYPE_CHECKING:
    from purgatory_server._engine.purgatory import DelayedOperationPurgatory
    from purgatory_server._service.core.finished_ids import FinishedIds
    from purgatory_server._service.core.operation import RemoteOperation
    from purgatory_server._service.outcomes.feed import Feed

__all__ = ["Gauges", "PurgatoryStats"]


@dataclass(frozen=True, slots=True)
class PurgatoryStats:
    """GetPurgatory/ListPurgatories' view of one purgatory (read on the loop thread)."""

    name: str
    settings: PurgatorySettings
    pending: int
    watched_keys: int
    last_sequence: int
    oldest_sequence: int
    subscribers: int
    incarnation: str = ""

    @classmethod
    def read(
        cls,
        settings: PurgatorySettings,
        pending: Sized,
        engine: DelayedOperationPurgatory[RemoteOperation],
        feed: Feed,
        incarnation: str,
    ) -> PurgatoryStats:
        return cls(
            settings.name,
            settings,
            len(pending),
            engine.watched_keys(),
            feed.last_sequence,
            feed.log.oldest_sequence,
            feed.subscriber_count,
            incarnation,
        )


class Gauges(NamedTuple):
    """Figures an exporter reads from its own thread.

    Each is one GIL-atomic read (``len``, an int) or the engine's own thread-safe count,
    so no lock is taken on the loop's behalf; each figure is exact, but together they are
    not one consistent snapshot.
    """

    pending: int
    watched_keys: int
    timer_size: int
    subscribers: int
    retained_events: int
    # The dedup window (:mod:`.finished_ids`): ids remembered, their estimated bytes, and
    # how many the byte cap dropped inside their window (a counter).
    dedup_ids: int = 0
    dedup_bytes: int = 0
    dedup_evicted: int = 0

    @classmethod
    def read(
        cls,
        pending: Sized,
        engine: DelayedOperationPurgatory[RemoteOperation],
        feed: Feed,
        finished: FinishedIds,
    ) -> Gauges:
        return cls(
            len(pending),
            engine.watched_keys(),
            engine.num_delayed(),
            feed.subscriber_count,
            len(feed.log),
            len(finished),
            finished.bytes,
            finished.evicted_early,
        )
