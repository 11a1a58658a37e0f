"""A histogram cheap enough for the hot path: one bisect and two additions per value.

The OpenTelemetry SDK's ``Histogram.record`` (attribute hashing, a lock per measurement)
is too heavy for the hot path, so the service accumulates into :class:`Histogram` (bucket
counts and a sum, no lock, no allocation per value) and :mod:`.metrics` turns each into
a data point when a reader collects.

Thread safety: each histogram has ONE writer thread (the event loop for everything the
purgatory records; a journal's writer thread for its fsync histograms). Readers (the
exporter's thread) take :meth:`snapshot`, a copy made with single GIL-atomic reads, so
they never block the writer; a snapshot may lag a value in flight, never tear a count.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "BATCH_BOUNDS",
    "DURATION_BOUNDS",
    "FSYNC_BOUNDS",
    "GROUP_BOUNDS",
    "LAG_BOUNDS",
    "LATENESS_BOUNDS",
    "Histogram",
    "HistogramSnapshot",
]

# Bucket upper bounds (Prometheus ``le``). Seconds for durations, counts otherwise.
# Expiry lateness is measured in whole wall-clock milliseconds, so its buckets resolve
# exactly 0 ms (on time), 1 ms, 2 ms, 3 ms, then coarser. No bound is negative: an
# early fire is counted apart (Prometheus drops _sum and _count of a histogram whose
# buckets go below zero).
LATENESS_BOUNDS: tuple[float, ...] = (
    0.0,
    0.001,
    0.002,
    0.003,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
DURATION_BOUNDS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    1800.0,
    3600.0,
)
FSYNC_BOUNDS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
GROUP_BOUNDS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)
BATCH_BOUNDS: tuple[float, ...] = GROUP_BOUNDS
LAG_BOUNDS: tuple[float, ...] = (0, 1, 10, 100, 1000, 10_000, 100_000)


class HistogramSnapshot(NamedTuple):
    total: int
    sum: float
    bucket_counts: list[int]  # len(bounds) + 1: the last is above every bound
    min: float
    max: float


class Histogram:
    """Bucket counts over fixed ``bounds``; single writer (see module docstring)."""

    __slots__ = ("bounds", "counts", "max", "min", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError("bounds must be strictly increasing")
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.min = float("inf")
        self.max = float("-inf")

    def record(self, value: float) -> None:
        # bisect_left: the first bound >= value, i.e. the bucket (b[i-1], b[i]] (``le``).
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        # Comparisons, not min()/max(): no call on the hot path.
        if value < self.min:  # noqa: PLR1730
            self.min = value
        if value > self.max:  # noqa: PLR1730
            self.max = value

    def snapshot(self) -> HistogramSnapshot:
        counts = list(self.counts)  # one atomic copy: count is derived from it
        total = sum(counts)
        if not total:
            return HistogramSnapshot(0, 0.0, counts, 0.0, 0.0)
        return HistogramSnapshot(total, self.sum, counts, self.min, self.max)
