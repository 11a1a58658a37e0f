"""The batching dispatcher's counters as OpenTelemetry metrics (when it is installed).

Like :mod:`purgatory_client.tracing`, this uses ``opentelemetry-api`` only, so whatever
SDK and exporter the application configured (Prometheus, OTLP, ...) ships them; nothing
is sent where none is configured. :func:`instrument_dispatcher` registers observable
instruments whose callbacks read :attr:`BatchingDispatcher.counters` (or the asyncio
twin's) at each collection:

- ``purgatory.client.dispatcher.tasks`` (counter, ``{task}``), one series per
  ``purgatory.dispatcher.event``: accepted, overridden, expired, overflowed, retried,
  succeeded, failed, rejected, resent (the :class:`~purgatory_client.DispatcherCounters`
  fields of the same names);
- ``purgatory.client.dispatcher.batches`` (counter, ``{batch}``): batches sent;
- ``purgatory.client.dispatcher.pending`` (gauge, ``{task}``): accepted, not yet sent;
- ``purgatory.client.dispatcher.in_flight`` (gauge, ``{batch}``): sent, not yet answered.

The callbacks hold the dispatcher weakly: a dispatcher that is gone stops reporting.

Thread safety: the callbacks run on the metric reader's thread; the counters snapshot
they read is safe there (see ``counters`` on each dispatcher).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError:  # the observability extra is optional
    otel_metrics = None  # type: ignore[assignment]

from purgatory_client._batcher import DispatcherCounters

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

__all__ = ["TASK_EVENTS", "instrument_dispatcher"]

# The DispatcherCounters fields counted per task, in the order they are reported.
TASK_EVENTS = (
    "accepted",
    "overridden",
    "expired",
    "overflowed",
    "retried",
    "succeeded",
    "failed",
    "rejected",
    "resent",
)


class _HasCounters(Protocol):
    @property
    def counters(self) -> DispatcherCounters: ...


def instrument_dispatcher(
    dispatcher: _HasCounters,
    meter: Meter | None = None,
    *,
    attributes: Mapping[str, str] | None = None,
) -> None:
    """Report ``dispatcher``'s counters through ``meter`` (default: the global meter
    provider's ``purgatory_client`` meter), each series with ``attributes`` too (tell
    several dispatchers apart, e.g. ``{"purgatory.name": "orders"}``).

    Raises RuntimeError if ``opentelemetry-api`` is not installed (the
    ``observability`` extra)."""
    if otel_metrics is None:
        raise RuntimeError(
            "instrument_dispatcher needs opentelemetry-api (install the observability extra)"
        )
    if meter is None:
        meter = otel_metrics.get_meter("purgatory_client")
    ref = weakref.ref(dispatcher)
    base = dict(attributes or {})

    def snapshot() -> DispatcherCounters | None:
        live = ref()
        return None if live is None else live.counters

    def observe(
        read: Callable[[DispatcherCounters], Iterable[tuple[int, dict[str, Any]]]],
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_: CallbackOptions) -> Iterable[Observation]:
            counters = snapshot()
            if counters is None:
                return []
            return [Observation(value, {**base, **extra}) for value, extra in read(counters)]

        return callback

    meter.create_observable_counter(
        "purgatory.client.dispatcher.tasks",
        [
            observe(
                lambda c: [(getattr(c, e), {"purgatory.dispatcher.event": e}) for e in TASK_EVENTS]
            )
        ],
        unit="{task}",
        description="Dispatcher tasks by what happened to them (DispatcherCounters)",
    )
    meter.create_observable_counter(
        "purgatory.client.dispatcher.batches",
        [observe(lambda c: [(c.batches, {})])],
        unit="{batch}",
        description="Batches the dispatcher sent",
    )
    meter.create_observable_gauge(
        "purgatory.client.dispatcher.pending",
        [observe(lambda c: [(c.pending, {})])],
        unit="{task}",
        description="Tasks accepted and not yet sent",
    )
    meter.create_observable_gauge(
        "purgatory.client.dispatcher.in_flight",
        [observe(lambda c: [(c.in_flight, {})])],
        unit="{batch}",
        description="Batches sent and not yet answered",
    )
