"""Journal options: the fsync policy and the per-journal tuning.

Plain values, kept apart from the I/O code so nothing here can form an import cycle.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FsyncPolicy(enum.Enum):
    """When the writer calls fsync, and so what a crash can lose (see docs/journal.md).

    - ``ALWAYS``: an append returns only after an fsync that covers it. Concurrent appends
      share fsyncs (group commit). Nothing acknowledged is lost, even on power loss.
    - ``INTERVAL``: an append returns after ``write()`` (the bytes are in the kernel); the
      writer fsyncs at most every ``fsync_interval_ms`` and within that bound once writes
      stop. A process crash loses nothing acknowledged; an OS crash or power loss can lose
      what was acknowledged in the last ``fsync_interval_ms`` plus one fsync's duration.
    - ``NEVER``: like ``INTERVAL`` without the timer; fsync happens only when a segment is
      sealed, during compaction and at close. A process crash loses nothing acknowledged;
      an OS crash or power loss loses whatever the kernel had not written back.
    """

    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class JournalConfig:
    """Tuning for one journal (one durable purgatory).

    ``segment_bytes`` is the size at which the head segment is sealed and a new one started
    (a single record larger than it still gets a segment of its own). ``retain_events``
    is the outcome window: outcomes whose sequence is greater than ``last_sequence -
    retain_events`` are kept across restarts and pin their segments. Compaction rewrites
    live data out of the oldest segments only if the rewritten bytes are at most
    ``compaction_max_carry_ratio`` of the bytes it frees; that makes its cost amortized
    O(1) per byte written and bounds the journal at roughly ``1 / ratio`` times the live
    data plus the window plus two segments.

    ``max_key_values`` bounds the latest-value-per-key memory the journal rebuilds and
    carries forward, with the server's policy (``limits.max_tracked_values``): the least
    recently signalled keys go first, but never a key a pending operation watches; without
    it the journal's size would grow with the key space, not the live data.

    ``dedup_window_ms`` and ``dedup_max_bytes`` (0: none) keep the outcomes that ended
    within that long of the newest one, within that many bytes, across restarts and
    compactions (they pin their segments like the event window): the server's memory of
    finished ids for idempotent re-sends (:mod:`.state`).

    ``space_retry_ms``: how often a journal that ran out of space tries to write again
    when nothing new arrives (every submission tries at once too).
    """

    fsync: FsyncPolicy = FsyncPolicy.ALWAYS
    fsync_interval_ms: int = 10
    segment_bytes: int = 64 * 1024 * 1024
    retain_events: int = 10_000
    compaction_max_carry_ratio: float = 0.5
    auto_compact: bool = True
    max_key_values: int = 100_000
    dedup_window_ms: int = 0
    dedup_max_bytes: int = 0
    space_retry_ms: int = 500

    def __post_init__(self) -> None:
        if self.fsync_interval_ms <= 0:
            raise ValueError("fsync_interval_ms must be positive")
        if self.space_retry_ms <= 0:
            raise ValueError("space_retry_ms must be positive")
        if self.segment_bytes < 4096:
            raise ValueError("segment_bytes must be at least 4096")
        if self.retain_events < 0:
            raise ValueError("retain_events must be >= 0")
        if self.dedup_window_ms < 0 or self.dedup_max_bytes < 0:
            raise ValueError("dedup_window_ms and dedup_max_bytes must be >= 0")
        if self.max_key_values < 0:
            raise ValueError("max_key_values must be >= 0")
        if not 0.0 < self.compaction_max_carry_ratio <= 1.0:
            raise ValueError("compaction_max_carry_ratio must be in (0, 1]")
