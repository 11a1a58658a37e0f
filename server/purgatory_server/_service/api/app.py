"""Assembling and running the gRPC server: servicer, health, reflection, shutdown.

:func:`create_server` builds and starts a ``grpc.aio`` server on the running loop and
returns it with its bound port. :meth:`PurgatoryServer.stop` is the graceful shutdown:

1. the operator's console, if on, stops listening and ends its pages' streams; health
   turns NOT_SERVING and the registry refuses new work (UNAVAILABLE);
2. waiting long-polls and Subscribe streams end at once with UNAVAILABLE;
3. ``grpc.aio.Server.stop(grace)``: no new calls, in-flight ones get ``grace`` seconds;
4. observability, if on, exports what it has, then every purgatory's reaper and timer
   threads are stopped.

Durable purgatories, configured or recorded in the data directory's catalog, are opened
and recovered before the server starts serving; one whose data directory fails (full,
read-only) answers UNAVAILABLE and is opened once it can be, while the others serve.
No server state lives in globals.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._cluster.node_loader import cluster_node
from purgatory_server._engine import COMPILED as ENGINE_COMPILED
from purgatory_server._engine.time import Time
from purgatory_server._service.api.admission import Admission, LoopLag
from purgatory_server._service.api.edge import add_purgatory_service
from purgatory_server._service.api.listen import check_bindable, parse_listen
from purgatory_server._service.api.servicer import PurgatoryServicer
from purgatory_server._service.api.tls import server_credentials
from purgatory_server._service.api.worker_listing import Siblings
from purgatory_server._service.config import fd_limits
from purgatory_server._service.config.auth import Authorizer
from purgatory_server._service.config.process_tuning import settle_heap, shorten_switch_interval
from purgatory_server._service.config.server_config import ServerConfig
from purgatory_server._service.core.budget import ServerBudget
from purgatory_server._service.core.registry import JournalFactory, PurgatoryRegistry, Router
from purgatory_server._service.durable.catalog import read_catalog
from purgatory_server._service.durable.local_store import durable_factory
from purgatory_server._service.observability import telemetry_from_config
from purgatory_server._service.workers.kept_purgatories import KeptPurgatories

if TYPE_CHECKING:
    from purgatory_server._cluster.node import ClusterNode
    from purgatory_server._service.console.listener import Console
    from purgatory_server._service.observability.setup import Telemetry
    from purgatory_server._service.workers.plan import WorkerPlan

__all__ = ["SERVICE_NAME", "PurgatoryServer", "create_server", "serve"]

logger = logging.getLogger("purgatory_server.service")

# In-flight calls of a connection past max_connection_age_ms get this long to finish.
CONNECTION_AGE_GRACE_MS = 30_000

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["PurgatoryService"].full_name

# gRPC's own transport limits (docs/service.md "Errors"): past them gRPC core answers
# RESOURCE_EXHAUSTED before any handler runs. Metadata has one limit, soft = hard: between
# core's defaults (8 KiB soft, 16 KiB hard) it refuses a random share of identical calls.
MAX_METADATA_BYTES = 16 * 1024
MAX_RECEIVE_MESSAGE_BYTES = 4 * 1024 * 1024  # core's default, stated


def server_options(config: ServerConfig, reuseport: bool = False) -> list[tuple[str, Any]]:
    """gRPC core channel arguments; documented in docs/configuration.md. ``reuseport``:
    a worker shares the port with its siblings (workers/supervisor.py)."""
    options: list[tuple[str, Any]] = [
        # One client connection may carry thousands of concurrent long-polls.
        ("grpc.max_concurrent_streams", config.max_concurrent_streams),
        # A burst of calls queues in gRPC core until the loop requests them; past these
        # limits core cancels them (its defaults are too low for a long-poll burst).
        ("grpc.server.max_pending_requests", config.max_pending_requests),
        ("grpc.server.max_pending_requests_hard_limit", config.max_pending_requests),
        # Fail loudly if the port is taken instead of sharing it with another server.
        ("grpc.so_reuseport", int(reuseport)),
        # Connections (fd_limits.py): capped below the open-files limit, idle and
        # half-open ones reaped, so idle connections cannot hold every slot.
        ("grpc.max_allowed_incoming_connections", connection_cap(config.max_connections)),
        ("grpc.max_connection_idle_ms", config.connection_idle_ms),
        ("grpc.server_handshake_timeout_ms", config.handshake_timeout_ms),
        ("grpc.keepalive_time_ms", config.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", config.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        # Clients ping every 2 s while a call is open (docs/clients.md "Failover"):
        # min_client_ping_interval_ms must stay below that, or they get GOAWAY.
        ("grpc.http2.min_ping_interval_without_data_ms", config.min_client_ping_interval_ms),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
    ]
    if config.max_connection_age_ms:
        options.append(("grpc.max_connection_age_ms", config.max_connection_age_ms))
        options.append(("grpc.max_connection_age_grace_ms", CONNECTION_AGE_GRACE_MS))
    return options


def connection_cap(configured: int) -> int:
    """``max_connections`` as enforced: clamped below this process's open-files limit."""
    return fd_limits.connection_cap(configured, fd_limits.fd_limit())


def log_limits(config: ServerConfig, budget: ServerBudget) -> None:
    """The effective memory budget, connection and stream limits, once the server is up
    (not before: a start that fails says only why, in one line)."""
    logger.info(
        "memory budget %d MiB: %d MiB held (%d MiB per purgatory), %d MiB retained",
        budget.capacity >> 20,
        budget.held_capacity >> 20,
        budget.share >> 20,
        budget.retained_capacity >> 20,
    )
    logger.info(
        "limits: open files %s, max_connections %d (configured %d), connection idle %d ms, "
        "max_concurrent_rpcs %d, max_subscribe_streams %d (%d per connection)",
        fd_limits.fd_limit() or "unlimited",
        connection_cap(config.max_connections),
        config.max_connections,
        config.connection_idle_ms,
        config.max_concurrent_rpcs,
        config.limits.max_subscribe_streams,
        config.limits.max_subscribe_streams_per_connection,
    )


@dataclass
class PurgatoryServer:
    """A started server: the grpc.aio server, its registry and its health servicer."""

    grpc_server: grpc.aio.Server
    registry: PurgatoryRegistry
    health: Any
    port: int
    config: ServerConfig
    telemetry: Telemetry | None = None
    # Replicated purgatories' owner/standby cycles; None without [cluster].
    cluster: Any = None
    # The event loop's lateness, measured for admission control (None: shedding off).
    loop_lag: LoopLag | None = None
    # A worker's channels to its siblings (whole-server listing); None: one process.
    siblings: Siblings | None = None
    # The operator's console (console_listen); None when it is off.
    console: Console | None = None
    _stopped: bool = False

    async def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown (see module docstring); idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.console is not None:
            await self.console.stop()
        if self.loop_lag is not None:
            self.loop_lag.stop()
        grace = self.config.grace_s if grace is None else grace
        await self.health.enter_graceful_shutdown()
        if self.cluster is not None:
            self.cluster.begin_stop()
        self.registry.begin_shutdown()
        await self.grpc_server.stop(grace)
        if self.siblings is not None:
            await self.siblings.close()
        if self.telemetry is not None:
            await asyncio.to_thread(self.telemetry.flush)
        await self.registry.shutdown()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.telemetry is not None:
            await asyncio.to_thread(self.telemetry.shutdown)
        logger.info("server on port %d stopped", self.port)

    async def wait_for_termination(self) -> None:
        await self.grpc_server.wait_for_termination()


async def create_server(
    address: str | None = None,
    config: ServerConfig | None = None,
    *,
    time: Time | None = None,
    reaper_enabled: bool = True,
    journal_factory: JournalFactory | None = None,
    telemetry: Telemetry | None = None,
    worker: WorkerPlan | None = None,
) -> tuple[PurgatoryServer, int]:
    """Build, start and return a server listening on ``address`` and its bound port.

    ``time``/``reaper_enabled`` let tests drive expiry by hand; ``journal_factory`` and
    ``telemetry`` replace the configured ones (the server owns ``telemetry`` and shuts it
    down on stop). ``worker``: one of several workers sharing ``address``'s port; it also
    listens on its own, serves only the purgatories placed on it and redirects the others.

    Configuration and address errors are raised before anything starts; a failure after
    the registry exists stops what started.
    """
    config = config if config is not None else ServerConfig()
    config.validate()
    address = address if address is not None else config.listen
    if worker is None:  # a worker's ports are held (SO_REUSEPORT) by its supervisor
        check_bindable(*parse_listen(address, "address"))
    credentials = server_credentials(config)  # before anything starts: ConfigError early
    loop = asyncio.get_running_loop()
    if journal_factory is None:
        journal_factory = durable_factory(config, loop, time)
    cluster = cluster_node(config, loop, time)
    if cluster is not None:
        journal_factory = cluster.wrap_factory(journal_factory)
    if telemetry is None:
        telemetry = telemetry_from_config(config)
    router = worker.route if worker is not None else None if cluster is None else cluster.route
    registry = _registry(config, loop, time, reaper_enabled, journal_factory, router, telemetry)
    lag = LoopLag(loop) if config.shed_lag_ms else None
    admission = Admission(lag, config.shed_lag_ms, config.shed_batch_entries)
    server, health_servicer, authorizer, siblings, console_socket = _grpc_server(
        config, registry, loop, telemetry, admission, worker=worker, cluster=cluster
    )
    port = _bind(server, address, credentials)
    if worker is not None and port:  # and its own port, named by its siblings' redirects
        own = f"{address.rsplit(':', 1)[0]}:{worker.own_ports[worker.index]}"
        port = port if _bind(server, own, credentials) else 0
    if port == 0:
        _drop_socket(console_socket)
        await registry.shutdown()
        await _shutdown_telemetry(telemetry)
        raise OSError(f"cannot listen on {address}")
    if authorizer is not None and credentials is None:
        logger.warning("tokens are configured but TLS is off: tokens travel in plaintext")
    try:
        _open_purgatories(config, registry, cluster, worker)
        await server.start()
        if cluster is not None:
            await cluster.start(registry, port)
        console = await _console(config, registry, console_socket)
    except BaseException:
        _drop_socket(console_socket)
        if cluster is not None:
            await cluster.stop()
        await registry.shutdown()
        await server.stop(None)
        await _shutdown_telemetry(telemetry)
        raise
    if lag is not None:
        lag.start()
    serving = health_pb2.HealthCheckResponse.SERVING
    await health_servicer.set("", serving)
    await health_servicer.set(SERVICE_NAME, serving)
    return PurgatoryServer(
        server, registry, health_servicer, port, config, telemetry, cluster, lag, siblings, console
    ), port


def _console_socket(
    server: grpc.aio.Server, config: ServerConfig, worker: WorkerPlan | None
) -> Path | None:
    """When the console is asked for (a worker set's first worker serves it: its listing
    covers its siblings), the private Unix socket it reaches this server on: in a fresh
    directory only this user may enter, plaintext whatever TLS the public port has (mutual
    TLS included); tokens are checked there as anywhere. None otherwise."""
    if not config.console_listen or (worker is not None and worker.index != 0):
        return None
    path = Path(tempfile.mkdtemp(prefix="purgatory-console-")) / "grpc.sock"
    if not _bind(server, f"unix:{path}", None):
        shutil.rmtree(path.parent, ignore_errors=True)
        raise OSError(f"cannot listen on the console's socket {path}")
    return path


def _drop_socket(socket: Path | None) -> None:
    """Remove the console's socket directory, if there is one (a start that failed)."""
    if socket is not None:
        shutil.rmtree(socket.parent, ignore_errors=True)


async def _console(
    config: ServerConfig, registry: PurgatoryRegistry, socket: Path | None
) -> Console | None:
    """The operator's console, reaching this server at ``socket`` (None: the console is
    off, and nothing of it loads)."""
    if socket is None:
        return None
    from purgatory_server._service.console.listener import start_console  # noqa: PLC0415

    return await start_console(config, registry, socket)


def _registry(  # noqa: PLR0917 - the assembly's one call site, names kept apart
    config: ServerConfig,
    loop: asyncio.AbstractEventLoop,
    time: Time | None,
    reaper_enabled: bool,
    journal_factory: JournalFactory,
    router: Router | None,
    telemetry: Telemetry | None,
) -> PurgatoryRegistry:
    """The registry, wired to routing (cluster or workers), then telemetry's instruments
    over it."""
    registry = PurgatoryRegistry(
        config.limits,
        config.defaults,
        loop,
        time=time,
        reaper_enabled=reaper_enabled,
        journal_factory=journal_factory,
        # The console draws from the same counters (no per-operation cost without either).
        metrics=(telemetry is not None and telemetry.metrics) or bool(config.console_listen),
        traced=telemetry is not None and telemetry.tracing,
        router=router,
    )
    if telemetry is not None:
        # setup needs the observability extra, which a telemetry implies is installed.
        from purgatory_server._service.observability.setup import instrument  # noqa: PLC0415

        instrument(telemetry, registry)
    return registry


def _grpc_server(
    config: ServerConfig,
    registry: PurgatoryRegistry,
    loop: asyncio.AbstractEventLoop,
    telemetry: Telemetry | None,
    admission: Admission,
    *,
    worker: WorkerPlan | None,
    cluster: ClusterNode | None = None,
) -> tuple[grpc.aio.Server, Any, Authorizer | None, Siblings, Path | None]:
    """The grpc.aio server with the purgatory service, health and reflection (bound only
    to the console's socket, when the console is on). With a plaintext ``cluster`` its
    listing asks the other servers for the replicated purgatories they own (the questions
    are plaintext, as the workers' are)."""
    server = grpc.aio.server(
        options=server_options(config, reuseport=worker is not None),
        maximum_concurrent_rpcs=config.max_concurrent_rpcs,
    )
    peers = () if worker is None else tuple(worker.peers())
    elsewhere = cluster.elsewhere if cluster is not None and not config.tls_cert else None
    definitions = KeptPurgatories(worker.definitions) if worker and worker.definitions else None
    servicer = PurgatoryServicer(
        registry, loop, admission, peers, elsewhere=elsewhere, definitions=definitions
    )
    authorizer = Authorizer(config.auth) if config.auth.enabled else None
    wrap = None if telemetry is None else partial(_wrap, telemetry)
    add_purgatory_service(server, servicer, authorizer, wrap)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    console_socket = _console_socket(server, config, worker)
    return server, health_servicer, authorizer, servicer.siblings, console_socket


def _wrap(
    telemetry: Telemetry, name: str, server_streaming: bool, handler: Callable[..., Any]
) -> Callable[..., Any]:
    """The edge's method wrapper: ``handler`` measured and traced (``rpc_telemetry``, which
    needs the observability extra, so it loads only when telemetry is on)."""
    from purgatory_server._service.api.rpc_telemetry import wrap_method  # noqa: PLC0415

    return wrap_method(name, server_streaming, handler, telemetry.rpc, telemetry.tracer)


def _bind(server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None) -> int:
    """The bound port, or 0 if ``address`` cannot be bound."""
    try:
        if credentials is None:
            return int(server.add_insecure_port(address))
        return int(server.add_secure_port(address, credentials))
    except RuntimeError:  # gRPC's "Failed to bind": a race with check_bindable
        return 0


def _open_purgatories(
    config: ServerConfig,
    registry: PurgatoryRegistry,
    cluster: ClusterNode | None,
    worker: WorkerPlan | None,
) -> None:
    """The configured purgatories, then the catalogued durable ones, then (a worker) those
    created at run time before a restart; replicated ones wait for the cluster, and a
    worker opens only those placed on it. One whose data directory fails is served as
    UNAVAILABLE and retried (PurgatoryRegistry.open_or_retry), the others serve."""
    for settings in config.purgatories:
        if cluster is not None and cluster.is_replicated(settings.name):
            continue  # owned or stood by once the cluster starts
        if worker is not None and not worker.owns(settings.name):
            continue
        registry.open_or_retry(registry.settings_for(settings.name, settings))
    configured = {p.name for p in config.purgatories}
    for settings in read_catalog(Path(config.data_dir), config.limits):
        if worker is not None and not worker.owns(settings.name):
            continue
        if settings.name not in configured and settings.durable:
            registry.open_or_retry(settings)
    if worker is not None and worker.definitions:  # created at run time, kept by the supervisor
        known = {p.name for p in registry.all_purgatories()}
        for settings in KeptPurgatories(worker.definitions).load():
            if worker.owns(settings.name) and settings.name not in known:
                registry.open_or_retry(settings)


async def _shutdown_telemetry(telemetry: Telemetry | None) -> None:
    if telemetry is not None:
        await asyncio.to_thread(telemetry.shutdown)


async def serve(config: ServerConfig, worker: WorkerPlan | None = None) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    fd_limits.raise_fd_limit()  # before the server's connection cap is computed
    server, port = await create_server(config.listen, config, worker=worker)
    log_limits(config, server.registry.budget)
    settle_heap()  # start-up's heap out of the collector's way (process_tuning.py)
    shorten_switch_interval()  # expiry lateness (process_tuning.py)
    if config.port_file:
        tmp = Path(config.port_file + ".tmp")
        tmp.write_text(f"{port}\n")
        tmp.replace(config.port_file)  # readers never see a half-written file
    host = config.listen.rsplit(":", 1)[0]
    names = ", ".join(p.name for p in server.registry.all_purgatories()) or "(none)"
    engine = "compiled (mypyc)" if ENGINE_COMPILED else "pure Python"  # which build runs
    who = "purgatory server" if worker is None else f"worker {worker.index} of {worker.count}"
    msg = "%s listening on %s:%d; purgatories: %s; engine: %s"
    logger.info(msg, who, host, port, names, engine)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        logger.info("shutting down (grace %.1fs)", config.grace_s)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await server.stop(config.grace_s)
