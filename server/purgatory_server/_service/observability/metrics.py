"""The purgatory's metrics as OpenTelemetry instruments (imports the SDK).

Nothing here runs on the hot path. Counters and gauges are *observable* instruments
whose callbacks read, when a reader collects, the plain counters the service keeps
(:class:`~.counters.PurgatoryMetrics`), the engine's counts and the RPC statistics.
Histograms are kept by the service in :class:`~.histogram.Histogram`;
:func:`histogram_metrics` renders them for the readers (see :mod:`.readers`).

Names follow OpenTelemetry's semantic conventions where one exists and use the
``purgatory.`` prefix otherwise. No attribute is ever an operation id or a key, so
cardinality is bounded by the number of purgatories times the few states, methods and
status codes. docs/observability.md lists every metric.

Thread safety: callbacks and :func:`histogram_metrics` run on the collecting reader's
thread and only make GIL-atomic reads of loop-owned state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics.export import AggregationTemporality, HistogramDataPoint, Metric
from opentelemetry.sdk.metrics.export import Histogram as HistogramData
from opentelemetry.util.types import Attributes

from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.observability.rpc_stats import RpcStats
from purgatory_server._service.telemetry.counters import FINAL_STATES, PurgatoryMetrics
from purgatory_server._service.telemetry.histogram import Histogram

__all__ = ["SCOPE", "histogram_metrics", "register_instruments"]

SCOPE = "purgatory_server"

Purgatories = Callable[[], list[NamedPurgatory]]

# (name, unit, description, attribute, histogram getter); see docs/observability.md.
_HISTOGRAMS: tuple[tuple[str, str, str, Callable[[PurgatoryMetrics], Histogram]], ...] = (
    (
        "purgatory.expiry.lateness",
        "s",
        "How late expiries fire: completion minus due time (whole ms; early fires count 0).",
        lambda m: m.lateness,
    ),
    (
        "purgatory.longpoll.duration",
        "s",
        "Time a TryCompleteElseWatch(wait=true) long-poll spent waiting for its outcome.",
        lambda m: m.longpoll,
    ),
    (
        "purgatory.subscriber.lag",
        "{event}",
        "Sequences a subscriber was behind the newest outcome when it was sent a batch.",
        lambda m: m.subscriber_lag,
    ),
)


Callback = Callable[[CallbackOptions], Iterable[Observation]]


def _gauges(purgatories: Purgatories) -> dict[str, Callback]:
    def figure(index: int) -> Callback:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            for p in purgatories():
                if p.metrics is not None:
                    yield Observation(p.gauges()[index], {"purgatory.name": p.name})

        return observe

    return {
        "delayed": figure(0),
        "watched": figure(1),
        "timer": figure(2),
        "subscribers": figure(3),
        "retained": figure(4),
        "dedup_ids": figure(5),
        "dedup_bytes": figure(6),
        "dedup_evicted": figure(7),
    }


def _memory_gauges(meter: Meter, purgatories: Purgatories, budget: ServerBudget) -> None:
    """The memory budget (core/budget.py): each pool's size and use, and each purgatory's
    part of them (plain int reads; releases other threads queued count at the next drain)."""

    def limit(options: CallbackOptions) -> Iterator[Observation]:
        yield Observation(budget.held_capacity, {"pool": "held"})
        yield Observation(budget.retained_capacity, {"pool": "retained"})
        yield Observation(budget.share, {"pool": "share"})

    def used(options: CallbackOptions) -> Iterator[Observation]:
        yield Observation(budget.held, {"pool": "held"})
        yield Observation(budget.retained, {"pool": "retained"})

    def held(options: CallbackOptions) -> Iterator[Observation]:
        for p in purgatories():
            if p.metrics is not None:
                yield Observation(p.account.held, {"purgatory.name": p.name})

    def retained(options: CallbackOptions) -> Iterator[Observation]:
        for p in purgatories():
            if p.metrics is not None:
                kept = sum(h.retained_bytes for h in p.account.holders)
                yield Observation(kept, {"purgatory.name": p.name})

    gauge = meter.create_observable_gauge
    gauge(
        "purgatory.memory.limit",
        [limit],
        "By",
        "The memory budget's pools (held, retained) and one purgatory's share of held.",
    )
    gauge("purgatory.memory.used", [used], "By", "Bytes charged to each pool, server-wide.")
    gauge("purgatory.memory.held", [held], "By", "Bytes a purgatory holds for pending work.")
    gauge(
        "purgatory.memory.retained",
        [retained],
        "By",
        "Bytes of a purgatory's retained outcomes and finished-id memory.",
    )


def register_instruments(
    meter: Meter, purgatories: Purgatories, rpc: RpcStats, budget: ServerBudget | None = None
) -> None:
    """Create every observable counter and gauge on ``meter``."""
    if budget is not None:
        _memory_gauges(meter, purgatories, budget)

    def by_purgatory(
        read: Callable[[PurgatoryMetrics], int],
    ) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            for p in purgatories():
                if p.metrics is not None:
                    yield Observation(read(p.metrics), {"purgatory.name": p.name})

        return observe

    def outcomes(options: CallbackOptions) -> Iterator[Observation]:
        for p in purgatories():
            m = p.metrics
            if m is not None:
                counts = list(m.outcomes)
                for state in FINAL_STATES:
                    attrs = {"purgatory.name": p.name, "state": state.name.lower()}
                    yield Observation(counts[state], attrs)

    def rescheduled(options: CallbackOptions) -> Iterator[Observation]:
        for p in purgatories():
            m = p.metrics
            if m is not None:
                name = p.name
                yield Observation(m.rescheduled, {"purgatory.name": name, "reason": "reschedule"})
                yield Observation(m.extended, {"purgatory.name": name, "reason": "resend"})

    def journal_size(options: CallbackOptions) -> Iterator[Observation]:
        for p in purgatories():
            m = p.metrics
            if m is not None and m.journal_bytes is not None:
                yield Observation(m.journal_bytes(), {"purgatory.name": p.name})

    def rejected(options: CallbackOptions) -> Iterator[Observation]:
        for method, code, count in rpc.rejected():
            attrs = {"rpc.method": method, "rpc.response.status_code": code}
            yield Observation(count, attrs)

    counter = meter.create_observable_counter
    counter(
        "purgatory.operations.registered",
        [by_purgatory(lambda m: m.registered)],
        "{operation}",
        "Operations registered (new ones; idempotent re-sends are not counted).",
    )
    counter(
        "purgatory.operations.outcomes",
        [outcomes],
        "{operation}",
        "Operations ended, by final state (completed, expired, force_completed, cancelled).",
    )
    counter(
        "purgatory.operations.rescheduled",
        [rescheduled],
        "{operation}",
        "Deadlines moved, by reason: reschedule (the Reschedule RPC) or resend (debounce).",
    )
    counter(
        "purgatory.signals",
        [by_purgatory(lambda m: m.signals)],
        "{signal}",
        "Signals applied by CheckAndComplete and BatchCheckAndComplete.",
    )
    counter(
        "purgatory.expiry.early",
        [by_purgatory(lambda m: m.early)],
        "{operation}",
        "Expiries that fired before their due time (within a tick); lateness counts them as 0.",
    )
    counter(
        "purgatory.rpc.rejected",
        [rejected],
        "{request}",
        "RPCs answered with a status other than OK or CANCELLED, by method and status code.",
    )
    gauges = _gauges(purgatories)
    gauge = meter.create_observable_gauge
    gauge(
        "purgatory.operations.delayed",
        [gauges["delayed"]],
        "{operation}",
        "Operations waiting for an outcome (Kafka's NumDelayedOperations).",
    )
    gauge(
        "purgatory.keys.watched",
        [gauges["watched"]],
        "{key}",
        "Distinct keys with at least one watcher (Kafka's PurgatorySize counts entries).",
    )
    gauge(
        "purgatory.timer.size",
        [gauges["timer"]],
        "{task}",
        "Tasks in the timing wheel (completed ones leave it at once).",
    )
    gauge("purgatory.subscribers", [gauges["subscribers"]], "{stream}", "Open Subscribe streams.")
    gauge(
        "purgatory.events.retained",
        [gauges["retained"]],
        "{event}",
        "Outcomes retained for subscribers that resume with after_sequence.",
    )
    gauge(
        "purgatory.dedup.ids",
        [gauges["dedup_ids"]],
        "{operation}",
        "Finished operation ids in the dedup window (re-sends answer with their outcome).",
    )
    gauge(
        "purgatory.dedup.size",
        [gauges["dedup_bytes"]],
        "By",
        "Estimated bytes the dedup window holds (bounded by dedup_max_bytes).",
    )
    counter(
        "purgatory.dedup.evicted",
        [gauges["dedup_evicted"]],
        "{operation}",
        "Finished ids dropped by dedup_max_bytes while still inside dedup_window_ms.",
    )
    gauge(
        "purgatory.journal.size",
        [journal_size],
        "By",
        "Bytes of a durable purgatory's journal segments on disk.",
    )


def _point(hist: Histogram, attrs: Attributes, start_ns: int, now_ns: int) -> HistogramDataPoint:
    snap = hist.snapshot()
    return HistogramDataPoint(
        attributes=attrs,
        start_time_unix_nano=start_ns,
        time_unix_nano=now_ns,
        count=snap.total,
        sum=snap.sum,
        bucket_counts=snap.bucket_counts,
        explicit_bounds=list(hist.bounds),
        min=snap.min,
        max=snap.max,
    )


def _metric(name: str, unit: str, description: str, points: list[HistogramDataPoint]) -> Metric:
    data = HistogramData(
        data_points=points, aggregation_temporality=AggregationTemporality.CUMULATIVE
    )
    return Metric(name=name, description=description, unit=unit, data=data)


def histogram_metrics(purgatories: Purgatories, rpc: RpcStats) -> list[Metric]:
    """Every histogram the service keeps, as cumulative OpenTelemetry metrics, now."""
    now = time.time_ns()
    found = [(p.name, p.metrics) for p in purgatories() if p.metrics is not None]
    out: list[Metric] = []
    wait = [
        _point(m.wait[s], {"purgatory.name": name, "state": s.name.lower()}, m.started_ns, now)
        for name, m in found
        for s in FINAL_STATES
    ]
    out.append(
        _metric(
            "purgatory.operation.wait.duration",
            "s",
            "Time from registration to outcome, by final state.",
            wait,
        )
    )
    for metric_name, unit, description, get in _HISTOGRAMS:
        points = [_point(get(m), {"purgatory.name": n}, m.started_ns, now) for n, m in found]
        out.append(_metric(metric_name, unit, description, points))
    batches = [
        _point(hist, {"purgatory.name": n, "purgatory.batch.kind": kind}, m.started_ns, now)
        for n, m in found
        for kind, hist in (("register", m.batch_register), ("signal", m.batch_signal))
    ]
    out.append(
        _metric(
            "purgatory.batch.size",
            "{item}",
            "Operations per registration call (kind=register), signals per signal call.",
            batches,
        )
    )
    durable = [(n, m) for n, m in found if m.journal_bytes is not None]
    out.append(
        _metric(
            "purgatory.journal.fsync.duration",
            "s",
            "Duration of each journal fsync (durable purgatories).",
            [_point(m.fsync_latency, {"purgatory.name": n}, m.started_ns, now) for n, m in durable],
        )
    )
    out.append(
        _metric(
            "purgatory.journal.fsync.records",
            "{record}",
            "Records made durable by one fsync (the group-commit size).",
            [_point(m.fsync_group, {"purgatory.name": n}, m.started_ns, now) for n, m in durable],
        )
    )
    rpc_points = [_point(hist, attrs, rpc.started_ns, now) for attrs, hist in rpc.durations()]
    out.append(
        _metric(
            "rpc.server.call.duration",
            "s",
            "Duration of each incoming RPC (OpenTelemetry RPC semantic conventions).",
            rpc_points,
        )
    )
    return [m for m in out if m.data.data_points]
