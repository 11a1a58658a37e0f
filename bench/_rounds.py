"""Interleaved rounds: how every benchmark that compares subjects (source trees, engine
builds, modes, clients) measures them on one shared machine.

Each round measures every subject once, in turn, and the next round starts with the next
subject (with two, the order flips every round), so none always runs first while the
machine's load drifts. A comparison is the median of per-round ratios, each ratio between
figures measured side by side; the 1-minute load average is recorded after every round.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")


def turn(subjects: Sequence[S], index: int) -> list[S]:
    """Round ``index``'s order: ``subjects`` rotated by ``index``."""
    k = index % len(subjects) if subjects else 0
    return [*subjects[k:], *subjects[:k]]


def load_1min() -> float:
    """The machine's 1-minute load average (NaN where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


class Rounds(Generic[T]):
    """``count`` interleaved rounds of the subjects ``labels``.

    Iterating yields each round's order; the caller measures the subjects in that order
    and ``record``s each result. ``run`` does both for one measurement per subject.
    """

    def __init__(self, labels: Sequence[str], count: int, *, progress: bool = True) -> None:
        self.labels = list(labels)
        self.count = count
        self.progress = progress  # "round i/n done" on stderr after each round
        self.results: list[dict[str, T]] = []  # per round, by label, in measuring order
        self.loads: list[float] = []  # 1-minute load average after each round

    def __iter__(self) -> Iterator[list[str]]:
        for index in range(self.count):
            self.results.append({})
            yield turn(self.labels, index)
            self.loads.append(load_1min())
            if self.progress:
                print(f"round {index + 1}/{self.count} done", file=sys.stderr)

    def record(self, label: str, result: T) -> None:
        """``label``'s result in the current round."""
        self.results[-1][label] = result

    def run(self, measure: Callable[[str], T]) -> Rounds[T]:
        """Every round: ``measure(label)`` for each subject in the round's order."""
        for order in self:
            for label in order:
                self.record(label, measure(label))
        return self

    async def run_async(self, measure: Callable[[str], Awaitable[T]]) -> Rounds[T]:
        """``run`` for a coroutine ``measure``."""
        for order in self:
            for label in order:
                self.record(label, await measure(label))
        return self

    def values(self, label: str, key: Callable[[T], float]) -> list[float]:
        """``key`` of ``label``'s result, per round."""
        return [key(result[label]) for result in self.results]

    def ratios(self, num: str, den: str, key: Callable[[T], float]) -> list[float]:
        """Per round, ``num``'s figure over ``den``'s; rounds where ``den``'s is 0 are left out."""
        pairs = zip(self.values(num, key), self.values(den, key), strict=True)
        return [n / d for n, d in pairs if d]

    def median_ratio(self, num: str, den: str, key: Callable[[T], float]) -> float | None:
        """The median of ``ratios``; None if no round gave one."""
        each = self.ratios(num, den, key)
        return statistics.median(each) if each else None

    def load_report(self) -> str:
        """One line: the load average after each round."""
        loads = ", ".join(f"{x:.2f}" for x in self.loads)
        return f"1-minute load average after each round: {loads}"
