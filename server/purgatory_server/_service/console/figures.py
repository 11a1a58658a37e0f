"""The console's figures, read from the server's own counters (no Prometheus).

:class:`Figures` samples every local purgatory once a second (pending count and the
cumulative outcome counters of :class:`~.telemetry.counters.PurgatoryMetrics`) into a
ring of the last ``WINDOW_S`` seconds, from which the pages take outcomes per second by
state and the charts their series; expiry lateness p99 and the budget are read when a
page is drawn. The sampler is the console's only recurring cost: one pass over the
purgatories per second, nothing per operation.

Loop-confined: the sampler and the pages run on the server's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.core.registry import PurgatoryRegistry
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.telemetry.counters import FINAL_STATES
from purgatory_server._service.telemetry.histogram import HistogramSnapshot

__all__ = ["FINAL_STATES", "WINDOW_S", "Figures", "LocalFigures", "Sample", "quantile"]

WINDOW_S = 300
# Outcomes per second are averaged over this many seconds of samples.
RATE_S = 10


@dataclass(frozen=True, slots=True)
class Sample:
    """One second's reading: per purgatory, pending and cumulative outcomes by state."""

    at: float
    pending: dict[str, int]
    outcomes: dict[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class LocalFigures:
    """What this process knows of one purgatory beyond ListPurgatories."""

    durable: bool
    rates: dict[OperationState, float]
    lateness_p99_s: float | None
    lateness: HistogramSnapshot | None
    lateness_bounds: tuple[float, ...]
    held_bytes: int
    share_bytes: int


def quantile(snapshot: HistogramSnapshot, bounds: tuple[float, ...], q: float) -> float | None:
    """The upper bound of the bucket holding quantile ``q`` (None: no values; the
    largest value seen when it lies above every bound)."""
    if not snapshot.total:
        return None
    rank = q * snapshot.total
    seen = 0
    for i, count in enumerate(snapshot.bucket_counts):
        seen += count
        if seen >= rank:
            return bounds[i] if i < len(bounds) else snapshot.max
    return snapshot.max


def _outcomes(p: NamedPurgatory) -> tuple[int, ...]:
    m = p.metrics
    return tuple(m.outcomes[s] for s in FINAL_STATES) if m is not None else ()


class Figures:
    """The sampler and the readings the pages draw from."""

    __slots__ = ("_clock", "_registry", "_samples", "_task")

    def __init__(
        self, registry: PurgatoryRegistry, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._samples: deque[Sample] = deque(maxlen=WINDOW_S)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.sample()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.sample()

    def sample(self) -> None:
        purgatories = self._registry.snapshot()
        self._samples.append(
            Sample(
                self._clock(),
                {p.name: p.gauges().pending for p in purgatories},
                {p.name: _outcomes(p) for p in purgatories},
            )
        )

    @property
    def samples(self) -> list[Sample]:
        return list(self._samples)

    def local(self, name: str) -> LocalFigures | None:
        """This process's figures of ``name``; None if it is not served here."""
        purgatory = next((p for p in self._registry.snapshot() if p.name == name), None)
        if purgatory is None:
            return None
        rates = self.rates(name)
        m = purgatory.metrics
        lateness = m.lateness.snapshot() if m is not None else None
        bounds = m.lateness.bounds if m is not None else ()
        p99 = quantile(lateness, bounds, 0.99) if lateness is not None else None
        return LocalFigures(
            durable=purgatory.settings.durable,
            rates=rates,
            lateness_p99_s=p99,
            lateness=lateness,
            lateness_bounds=bounds,
            held_bytes=purgatory.account.held,
            share_bytes=self._registry.budget.share,
        )

    def rates(self, name: str) -> dict[OperationState, float]:
        """Outcomes per second by final state over the last ``RATE_S`` seconds."""
        samples = [s for s in self._samples if s.outcomes.get(name)]
        if len(samples) < 2:
            return dict.fromkeys(FINAL_STATES, 0.0)
        last = samples[-1]
        first = next((s for s in samples if last.at - s.at <= RATE_S), samples[0])
        if first is last:
            first = samples[-2]
        span = max(last.at - first.at, 1e-3)
        return {
            state: max(0, last.outcomes[name][i] - first.outcomes[name][i]) / span
            for i, state in enumerate(FINAL_STATES)
        }
