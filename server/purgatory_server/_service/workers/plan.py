"""A worker's static view of its siblings: who owns which purgatory, and where it listens.

Placement is the cluster's rendezvous hashing (:func:`purgatory_server._cluster.placement.
ranked`) over the worker ids ``worker-0`` .. ``worker-{N-1}``: every worker computes the
same owner for a name without asking anyone, and it does not change while N does not (a
restarted worker keeps its index, so its purgatories and journals come back to it). All
workers share the data directory and each opens only what it owns.

Static ownership on one machine needs no lease: two workers never own the same name,
and a journal is locked by the one process that opened it. Thread-safety: immutable.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace

from purgatory_server._cluster.placement import ranked
from purgatory_server._service.config.server_config import ConfigError, ServerConfig
from purgatory_server._service.model.errors import NotOwner

__all__ = [
    "WORKERS_PER_CORE",
    "WorkerPlan",
    "max_workers",
    "usable_cores",
    "worker_config",
    "worker_count",
    "worker_id",
    "worker_plan",
]


def worker_id(index: int) -> str:
    """The placement id of worker ``index`` (stable: placement hashes it)."""
    return f"worker-{index}"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


# The most workers per usable core. A worker is a whole server (an event loop, its
# threads, ~40 MB resident); past a few per core they only contend for the cores, and a
# thousand of them take minutes to start and to stop.
WORKERS_PER_CORE = 4


def max_workers() -> int:
    """The most workers this process may start: :data:`WORKERS_PER_CORE` per usable core."""
    return WORKERS_PER_CORE * usable_cores()


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """Worker ``index`` of ``len(own_ports)``; ``host`` is where all of them listen,
    ``shared_port`` the port they share, ``own_ports[i]`` worker i's own port, and
    ``advertise`` the host named in a redirect (the listen host unless it is a wildcard);
    ``definitions`` the supervisor's directory of run-time purgatory definitions
    (:mod:`.kept_purgatories`; "" if none)."""

    index: int
    host: str
    shared_port: int
    own_ports: tuple[int, ...]
    advertise: str
    definitions: str = ""

    @property
    def count(self) -> int:
        return len(self.own_ports)

    def owner_of(self, name: str) -> int:
        """The index of the worker that owns purgatory ``name``."""
        best = ranked(name, [worker_id(i) for i in range(self.count)])[0]
        return int(best.rsplit("-", 1)[1])

    def owns(self, name: str) -> bool:
        return self.owner_of(name) == self.index

    def address_of(self, index: int) -> str:
        """Worker ``index``'s own address, as clients should dial it."""
        return f"{self.advertise}:{self.own_ports[index]}"

    def peers(self) -> list[str]:
        """The other workers' own addresses (whole-server listing asks them)."""
        return [self.address_of(i) for i in range(self.count) if i != self.index]

    def route(self, name: str, creating: bool = False) -> None:
        """The registry's router: NotOwner naming the owner for a name another worker
        owns (the registry asks before creating a name and on a look-up it misses)."""
        owner = self.owner_of(name)
        if owner != self.index:
            raise NotOwner(name, self.address_of(owner))


def worker_count(config: ServerConfig) -> int:
    """How many workers ``config`` asks for (0: one per usable core); ConfigError past
    :func:`max_workers` and for what several workers cannot serve yet: a ``[cluster]``
    (ownership is then the cluster's), a unix socket (no shared port), TLS (the
    whole-server listing asks the other workers in plaintext)."""
    count = config.workers or usable_cores()
    cap = max_workers()
    if count > cap:
        raise ConfigError(
            f"workers: {count} is more than {cap}, {WORKERS_PER_CORE} per usable core "
            f"({usable_cores()} here); use --workers auto for one per core"
        )
    if count > 1:
        if config.cluster.nats_urls:
            raise ConfigError("workers > 1 cannot be combined with [cluster] nats_urls")
        if config.listen.startswith("unix"):
            raise ConfigError("workers > 1 needs a TCP listen address (host:port)")
        if config.tls_cert:
            raise ConfigError("workers > 1 does not support TLS yet (tls_cert is set)")
    return count


def worker_plan(
    config: ServerConfig, index: int, ports_text: str | None, definitions: str | None = None
) -> WorkerPlan:
    """Worker ``index``'s plan from the supervisor's ``--worker-ports`` (shared port,
    then each worker's own port) and ``--worker-definitions``."""
    try:
        ports = [int(p) for p in (ports_text or "").split(",")]
    except ValueError:
        raise ConfigError(f"--worker-ports: not a list of ports: {ports_text!r}") from None
    if len(ports) < 2 or not 0 <= index < len(ports) - 1:
        raise ConfigError(f"--worker-index {index} does not fit --worker-ports {ports_text!r}")
    host = config.listen.rsplit(":", 1)[0].strip("[]")
    advertise = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    if ":" in advertise:
        advertise = f"[{advertise}]"
    return WorkerPlan(index, host, ports[0], tuple(ports[1:]), advertise, definitions or "")


def worker_config(config: ServerConfig, count: int) -> ServerConfig:
    """``config`` as one of ``count`` workers runs it: each holds ``1/count`` of the
    server's memory budget."""
    limits = config.limits
    if limits.memory_budget_bytes:
        share = max(1 << 20, limits.memory_budget_bytes // count)
        limits = replace(limits, memory_budget_bytes=share)
    else:
        percent = max(1, limits.memory_budget_percent // count)
        limits = replace(limits, memory_budget_percent=percent)
    return replace(config, limits=limits)
