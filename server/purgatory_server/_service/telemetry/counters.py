"""Per-purgatory counters and histograms, kept by the service and read by exporters.

:class:`PurgatoryMetrics` is plain Python (no OpenTelemetry import); a purgatory without
one (metrics off) checks ``is None``. Gauges are not kept here: :mod:`.metrics` reads
them from the engine and the service when a reader collects.

Thread safety: every field is written by one thread. The event loop writes the counters
and every histogram except ``fsync_latency`` and ``fsync_group``, which the purgatory's
journal writer thread writes (see :meth:`on_fsync`). Exporters read from their own
thread with GIL-atomic reads (ints, :meth:`Histogram.snapshot`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.telemetry.histogram import (
    BATCH_BOUNDS,
    DURATION_BOUNDS,
    FSYNC_BOUNDS,
    GROUP_BOUNDS,
    LAG_BOUNDS,
    LATENESS_BOUNDS,
    Histogram,
)

if TYPE_CHECKING:
    from purgatory_server._service.model.ended import Ended

__all__ = ["FINAL_STATES", "PurgatoryMetrics"]

_EXPIRED = OperationState.EXPIRED

# The states an outcome can have, as exported in the ``state`` attribute.
FINAL_STATES: tuple[OperationState, ...] = (
    OperationState.COMPLETED,
    OperationState.EXPIRED,
    OperationState.FORCE_COMPLETED,
    OperationState.CANCELLED,
)


class PurgatoryMetrics:
    """What one purgatory counts; see the module docstring for who writes what."""

    __slots__ = (
        "batch_register",
        "batch_signal",
        "early",
        "extended",
        "fsync_group",
        "fsync_latency",
        "journal_bytes",
        "lateness",
        "longpoll",
        "outcomes",
        "registered",
        "rescheduled",
        "signals",
        "started_ns",
        "subscriber_lag",
        "wait",
    )

    def __init__(self, journal_bytes: Callable[[], int] | None = None) -> None:
        self.started_ns = time.time_ns()  # start of the cumulative series
        self.registered = 0
        self.signals = 0
        # Deadlines moved: by Reschedule, and by debounced re-sends (extend_on_resend).
        self.rescheduled = 0
        self.extended = 0
        # Indexed by OperationState value (an IntEnum): no dict lookup per outcome.
        self.outcomes = [0] * (max(FINAL_STATES) + 1)
        # Wait to outcome, one histogram per final state (indexed like ``outcomes``).
        self.wait = [Histogram(DURATION_BOUNDS) for _ in self.outcomes]
        self.lateness = Histogram(LATENESS_BOUNDS)
        # Expiries that fired before their due time (the wheel works in whole ticks, so
        # one may fire up to a tick early); recorded as lateness 0.
        self.early = 0
        self.longpoll = Histogram(DURATION_BOUNDS)
        self.batch_register = Histogram(BATCH_BOUNDS)
        self.batch_signal = Histogram(BATCH_BOUNDS)
        self.subscriber_lag = Histogram(LAG_BOUNDS)
        self.fsync_latency = Histogram(FSYNC_BOUNDS)
        self.fsync_group = Histogram(GROUP_BOUNDS)
        # A durable purgatory's journal size on disk, from its store (any thread).
        self.journal_bytes = journal_bytes

    def on_outcomes(self, ops: Sequence[Ended]) -> None:
        """Count a published batch (loop thread): state, wait time, expiry lateness."""
        outcomes = self.outcomes
        wait = self.wait
        late = self.lateness.record
        for op in ops:
            state = op.state
            outcomes[state] += 1
            done = op.complete_time_ms
            wait[state].record((done - op.create_time_ms) / 1000)
            if state is _EXPIRED:
                late_ms = done - op.due_time_ms
                if late_ms < 0:
                    self.early += 1
                    late_ms = 0
                late(late_ms / 1000)

    def on_fsync(self, seconds: float, records: int) -> None:
        """The journal's fsync hook (its writer thread): latency and group size."""
        self.fsync_latency.record(seconds)
        self.fsync_group.record(records)
