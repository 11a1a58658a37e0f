"""The metrics an operator looks for first (imports the SDK): the process, the build,
the server's budgets, Session streams, subscribers' buffers and cut-offs, worker groups
and schedules.

Like :mod:`.metrics`, every instrument is observable and reads figures the service
keeps anyway (or ``/proc/self``), so nothing is added to the hot path; the two counts are
named so promtool accepts them. Cardinality: per purgatory, plus per worker group
(bounded by ``max_groups`` each).

Thread safety: callbacks run on the collecting reader's thread and only read
(GIL-atomic copies of loop-owned collections; see ``Feed.buffered``,
``WorkerGroup.counts``, ``SessionFigures.buffered``).
"""

from __future__ import annotations

import os
import platform
import resource
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from purgatory_server._engine import COMPILED
from purgatory_server._service.groups.entry import EntryState
from purgatory_server._version import version

if TYPE_CHECKING:
    from purgatory_server._service.core.registry import PurgatoryRegistry

__all__ = ["process_figures", "register_operator_instruments"]

Callback = Callable[[CallbackOptions], Iterable[Observation]]


def process_figures() -> dict[str, float]:
    """This process's rss (bytes), threads, open descriptors, user and system CPU (s).

    From /proc/self where there is one (Linux); elsewhere the peak RSS, Python's own
    threads and no descriptor count.
    """
    times = os.times()
    figures = {"cpu_user": times.user, "cpu_system": times.system}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        figures["rss"] = int(fields["VmRSS"].split()[0]) * 1024
        figures["threads"] = int(fields["Threads"])
        figures["fds"] = len(os.listdir("/proc/self/fd"))
    except (OSError, KeyError, ValueError):
        figures["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        figures["threads"] = threading.active_count()
    return figures


def _process(meter: Meter) -> None:
    def read(name: str) -> Callback:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            value = process_figures().get(name)
            if value is not None:
                yield Observation(value)

        return observe

    def cpu(options: CallbackOptions) -> Iterator[Observation]:
        figures = process_figures()
        yield Observation(figures["cpu_user"], {"cpu.mode": "user"})
        yield Observation(figures["cpu_system"], {"cpu.mode": "system"})

    meter.create_observable_gauge(
        "process.memory.usage", [read("rss")], "By", "Resident set size of the server process."
    )
    meter.create_observable_counter(
        "process.cpu.time", [cpu], "s", "CPU time of the server process, by mode."
    )
    meter.create_observable_gauge(
        "process.open_file_descriptors",
        [read("fds")],
        "{file_descriptor}",
        "Open file descriptors (sockets, journal segments); compare with LimitNOFILE.",
    )
    meter.create_observable_gauge(
        "process.threads", [read("threads")], "{thread}", "Threads of the server process."
    )


def _build(meter: Meter) -> None:
    attributes = {
        "version": version(),
        "python.version": platform.python_version(),
        "engine": "compiled" if COMPILED else "python",
    }

    def build(options: CallbackOptions) -> Iterator[Observation]:
        yield Observation(1, attributes)

    meter.create_observable_gauge(
        "purgatory.build.info", [build], "1", "Always 1; the attributes say what runs."
    )


def _budget(meter: Meter, registry: PurgatoryRegistry) -> None:
    budget, limits = registry.budget, registry.limits

    def used(options: CallbackOptions) -> Iterator[Observation]:
        yield Observation(budget.pending, {"resource": "pending"})
        yield Observation(budget.payload_bytes, {"resource": "payload_bytes"})

    def limit(options: CallbackOptions) -> Iterator[Observation]:
        yield Observation(limits.max_total_pending, {"resource": "pending"})
        yield Observation(limits.max_pending_payload_bytes, {"resource": "payload_bytes"})

    meter.create_observable_gauge(
        "purgatory.budget.used",
        [used],
        "1",
        "Server-wide budget in use, by resource: pending operations and their payload "
        "bytes (memory in bytes: purgatory.memory.*). Past the limit: RESOURCE_EXHAUSTED.",
    )
    meter.create_observable_gauge(
        "purgatory.budget.limit",
        [limit],
        "1",
        "The server-wide budget, by resource (max_total_pending, max_pending_payload_bytes).",
    )


def _streams(meter: Meter, registry: PurgatoryRegistry) -> None:
    sessions = registry.sessions

    def per_purgatory(read: Callable[..., int]) -> Callback:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            for p in registry.snapshot():
                yield Observation(read(p), {"purgatory.name": p.name})

        return observe

    meter.create_observable_gauge(
        "purgatory.sessions",
        [lambda options: [Observation(len(sessions.open))]],
        "{stream}",
        "Open Session streams (watch_many, the batching dispatcher).",
    )
    meter.create_observable_gauge(
        "purgatory.session.buffered",
        [lambda options: [Observation(sessions.buffered())]],
        "{message}",
        "Outcomes and acknowledgements queued to Session streams (bound: session_buffer each).",
    )
    meter.create_observable_counter(
        "purgatory.session.cut_off",
        [lambda options: [Observation(sessions.cut_off)]],
        "{stream}",
        "Session streams ended because the client stopped reading (session_buffer full).",
    )
    meter.create_observable_gauge(
        "purgatory.subscriber.buffered",
        [per_purgatory(lambda p: p.feed.buffered())],
        "{event}",
        "Outcomes queued to Subscribe streams, not yet sent (bound: subscriber_buffer each).",
    )
    meter.create_observable_counter(
        "purgatory.subscriber.cut_off",
        [per_purgatory(lambda p: p.feed.cut_off)],
        "{stream}",
        "Subscribe streams ended for falling more than subscriber_buffer events behind.",
    )


def _groups_and_schedules(meter: Meter, registry: PurgatoryRegistry) -> None:
    def groups(index: int) -> Callback:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            for p in registry.snapshot():
                for group in p.groups.all():
                    attrs = {"purgatory.name": p.name, "purgatory.group": group.name}
                    yield Observation(group.counts()[index], attrs)

        return observe

    def members(options: CallbackOptions) -> Iterator[Observation]:
        for p in registry.snapshot():
            for group in p.groups.all():
                attrs = {"purgatory.name": p.name, "purgatory.group": group.name}
                yield Observation(len(group.members), attrs)

    def schedules(options: CallbackOptions) -> Iterator[Observation]:
        for p in registry.snapshot():
            table = p.schedules
            count, armed = (len(table), table.armed) if table is not None else (0, 0)
            yield Observation(count, {"purgatory.name": p.name, "state": "defined"})
            yield Observation(armed, {"purgatory.name": p.name, "state": "armed"})

    for index, (what, meaning) in enumerate(
        (
            ("ready", "Outcomes waiting for a member of the worker group."),
            ("leased", "Outcomes delivered to a member, not yet acked (lease running)."),
            ("dead_letters", "Outcomes past max_attempts, kept for redrive or discard."),
        )
    ):
        meter.create_observable_gauge(
            f"purgatory.group.{what}", [groups(index)], "{event}", meaning
        )
    meter.create_observable_gauge(
        "purgatory.group.members", [members], "{stream}", "Connected members of the group."
    )

    def retrying(options: CallbackOptions) -> Iterator[Observation]:
        for p in registry.snapshot():
            for group in p.groups.all():
                attrs = {"purgatory.name": p.name, "purgatory.group": group.name}
                yield Observation(group.tally()[EntryState.WAITING], attrs)

    meter.create_observable_gauge(
        "purgatory.group.retrying",
        [retrying],
        "{event}",
        "Outcomes waiting out a nack's delay or the group's retry backoff.",
    )
    meter.create_observable_gauge(
        "purgatory.schedules",
        [schedules],
        "{schedule}",
        "Recurring schedules, by state: defined, and armed (an occurrence registered); "
        "defined above armed means a full purgatory refuses occurrences.",
    )


def register_operator_instruments(meter: Meter, registry: PurgatoryRegistry) -> None:
    """Create every instrument of this module on ``meter``."""
    _process(meter)
    _build(meter)
    _budget(meter, registry)
    _streams(meter, registry)
    _groups_and_schedules(meter, registry)
