"""Server configuration: defaults, a TOML file, ``PURGATORY_*`` environment overrides.

Precedence (later wins): built-in defaults, the ``--config`` TOML file, environment
variables, command-line flags. Every option is documented in ``docs/configuration.md``.

Configuration objects are frozen dataclasses, read from any thread without locking.
Unknown TOML keys and malformed values raise :class:`ConfigError`, so a typo never
silently falls back to a default. Per-purgatory settings are declared in
:mod:`.settings_spec`.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from purgatory_server._service.config.auth import AuthConfig, parse_auth
from purgatory_server._service.config.cluster_config import ClusterConfig, parse_cluster
from purgatory_server._service.config.settings_spec import (
    DEFAULT_MAX_RETAINED_EVENTS,
    FSYNC_POLICIES,
    ConfigError,
    PurgatorySettings,
    setting_bounds,
)

__all__ = [
    "MAX_TIMEOUT_MS",
    "MIN_TIMEOUT_MS",
    "ConfigError",
    "Limits",
    "PurgatorySettings",
    "ServerConfig",
    "apply_env",
    "load_config",
    "setting_bounds",
]

ENV_PREFIX = "PURGATORY_"


@dataclass(frozen=True, slots=True)
class Limits:
    """Request limits, enforced on every RPC (see docs/configuration.md)."""

    max_keys_per_operation: int = 1024
    max_key_length: int = 256
    max_operation_id_length: int = 128
    max_name_length: int = 128
    max_payload_bytes: int = 64 * 1024
    max_signal_data_bytes: int = 64 * 1024
    max_result_data_bytes: int = 256 * 1024
    max_result_sources: int = 1024
    # Conditions' expressions (docs/conditions.md): the attributes of one signal or
    # operation (serialized), and one expression's characters.
    max_attributes_bytes: int = 16 * 1024
    max_expression_length: int = 1024
    min_timeout_ms: int = 1
    max_timeout_ms: int = 7 * 24 * 3600 * 1000
    max_batch_size: int = 10_000
    max_purgatories: int = 256
    max_subscribers: int = 1024
    # A subscriber's buffer: events and (estimated) bytes; past either it is cut off.
    subscriber_buffer: int = 10_000
    subscriber_buffer_bytes: int = 16 << 20
    # Open Subscribe streams (plain and worker-group members) per server and per client
    # connection: RESOURCE_EXHAUSTED past either.
    max_subscribe_streams: int = 10_000
    max_subscribe_streams_per_connection: int = 1_000
    max_tracked_values: int = 100_000
    # One Session stream: operations watched and not yet delivered, in messages and in
    # estimated bytes, past which the server stops reading its frames (flow control).
    session_buffer: int = 10_000
    session_buffer_bytes: int = 64 * 1024 * 1024
    # Session streams open at once on the server (more: RESOURCE_EXHAUSTED), and how long
    # a named session's state is kept for a resume after its stream ended.
    max_sessions: int = 1024
    session_resume_ms: int = 60_000
    # Per purgatory: the largest retained_events a purgatory may be configured with.
    max_retained_events: int = DEFAULT_MAX_RETAINED_EVENTS
    # Server-wide capacity (RESOURCE_EXHAUSTED: it frees up as operations end or
    # purgatories are deleted): pending operations over all purgatories, the payload
    # bytes they hold.
    max_total_pending: int = 10_000_000
    max_pending_payload_bytes: int = 1 << 30
    # The memory budget (core/budget.py, docs/service.md "Limits"): bytes the server may
    # hold for clients; 0: memory_budget_percent of the machine's (or cgroup's) memory.
    memory_budget_bytes: int = 0
    memory_budget_percent: int = 50
    # The retained pool (retained windows, finished-id memories), percent of the budget;
    # the rest is the held pool (pending work, stream buffers).
    retained_memory_percent: int = 25
    # The most of the held pool one purgatory may hold, percent.
    purgatory_memory_percent: int = 50
    # Worker groups (docs/service.md "Worker groups"): groups per purgatory, and outcomes
    # one group may hold (ready, leased or dead) before new registrations are refused.
    max_groups: int = 16
    max_group_backlog: int = 100_000


# The longest timeout a server may allow: ~10 years, so due times stay far inside int64
# and the timing wheel's overflow levels stay few.
MAX_TIMEOUT_MS = 10 * 365 * 24 * 3600 * 1000
# The shortest timeout a server may allow: 0 on the wire means "not set". The clients'
# CLI mirrors both (purgatory_client._bounds), so it refuses what no server accepts.
MIN_TIMEOUT_MS = 1


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything ``python -m purgatory_server`` needs to run."""

    listen: str = "127.0.0.1:50051"
    grace_s: float = 5.0
    # Beyond it gRPC answers RESOURCE_EXHAUSTED instead of queueing.
    max_concurrent_rpcs: int = 50_000
    # HTTP/2 streams one connection may have open at once.
    max_concurrent_streams: int = 50_000
    # Calls that arrived but are not yet picked up by the servicer (gRPC core's defaults
    # cancel part of a long-poll burst).
    max_pending_requests: int = 50_000
    # Client connections at once (clamped below the open-files limit, fd_limits.py); past
    # it gRPC closes a new connection as it is accepted.
    max_connections: int = 10_000
    # A connection with no call for this long is closed (GOAWAY; clients reconnect).
    connection_idle_ms: int = 300_000
    # Every connection is closed after this long (GOAWAY, then its calls get 30 s); 0: never.
    max_connection_age_ms: int = 0
    # A connection must finish its HTTP/2 (and TLS) handshake within this, or is closed.
    handshake_timeout_ms: int = 20_000
    # The server pings a connection idle this long and drops it if no answer comes in
    # keepalive_timeout_ms (a dead peer's connection is not held for hours).
    keepalive_time_ms: int = 60_000
    keepalive_timeout_ms: int = 20_000
    # Clients may ping at most this often; one pinging faster is sent GOAWAY.
    min_client_ping_interval_ms: int = 1_000
    # Admission control (api/admission.py): while the event loop runs more than
    # shed_lag_ms late, batches of shed_batch_entries or more are RESOURCE_EXHAUSTED; 0: off.
    shed_lag_ms: int = 0
    shed_batch_entries: int = 1000
    # Worker processes behind the one address (workers/): 1 is one process; 0 ("auto"
    # on the command line) is one per usable core.
    workers: int = 1
    log_level: str = "INFO"
    # "text" (one human-readable line per event) or "json" (one JSON object per line).
    log_format: str = "text"
    # Where durable purgatories keep their journals (relative to the working directory).
    data_dir: str = "data"
    # Server-wide fsync policy of durable purgatories: always, interval or never.
    fsync: str = "always"
    # Under "interval": the longest time acknowledged records may sit unsynced, in ms.
    fsync_interval_ms: int = 10
    # Truncate a journal at a corrupt mid-file record instead of refusing to start.
    repair_journal: bool = False
    # If set, the bound port is written to this file once the server serves.
    port_file: str = ""
    # TLS: PEM certificate chain and private key; with a client CA, mutual TLS.
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    # Bearer tokens and their per-purgatory permissions (``[auth]``; .auth module).
    auth: AuthConfig = field(default_factory=AuthConfig)
    # Observability (docs/observability.md; needs the `observability` extra).
    # host:port of the Prometheus scrape endpoint; "" (default) serves none.
    metrics_listen: str = ""
    # OTLP/gRPC collector for metrics and spans (e.g. http://127.0.0.1:4317); "" none.
    otlp_endpoint: str = ""
    # A server span per RPC, its context carried by the outcomes it registers; on by
    # itself when otlp_endpoint is set.
    tracing: bool = False
    # host:port of the operator's console (docs/console.md); "" (default) serves none.
    console_listen: str = ""
    # Replicated purgatories on NATS JetStream (``[cluster]``; docs/scale-out.md).
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    limits: Limits = field(default_factory=Limits)
    defaults: PurgatorySettings = field(default_factory=PurgatorySettings)
    purgatories: tuple[PurgatorySettings, ...] = (PurgatorySettings(),)

    def validate(self) -> None:
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.shed_lag_ms < 0 or self.shed_batch_entries < 1:
            raise ConfigError("shed_lag_ms must be >= 0 and shed_batch_entries >= 1")
        for name in ("grace_s", "max_connection_age_ms", "workers"):  # workers 0: per core
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        self._validate_limits()
        self._validate_listeners()
        if self.log_level.upper() not in _LOG_LEVELS:
            raise ConfigError(
                f"log_level must be one of {list(_LOG_LEVELS)}, got {self.log_level!r}"
            )
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"log_format must be 'text' or 'json', got {self.log_format!r}")
        if self.fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync must be one of {sorted(FSYNC_POLICIES)}, got {self.fsync!r}")
        if self.fsync_interval_ms <= 0:
            raise ConfigError(f"fsync_interval_ms must be positive, got {self.fsync_interval_ms}")
        self._validate_console()
        names = [p.name for p in self.purgatories]
        if len(set(names)) != len(names):
            raise ConfigError(f"purgatory names must be unique, got {names}")
        for p in (self.defaults, *self.purgatories):
            p.validate(self.limits)
        try:
            self.cluster.validate({p.name: p.durable for p in self.purgatories})
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _validate_listeners(self) -> None:
        if self.metrics_listen and _same_port(self.metrics_listen, self.listen):
            raise ConfigError(
                f"metrics_listen {self.metrics_listen} takes the port of listen {self.listen}: "
                "the metrics endpoint and the gRPC server need a port each"
            )

    def _validate_console(self) -> None:
        if self.console_listen:
            host, _, port = self.console_listen.rpartition(":")
            if not host or not port.isdigit() or int(port) > 65535:
                raise ConfigError(f"console_listen must be host:port, got {self.console_listen!r}")

    def _validate_limits(self) -> None:
        for f in fields(self.limits):
            if getattr(self.limits, f.name) < 0:
                raise ConfigError(f"limits.{f.name} must be >= 0")
        budget = self.limits.memory_budget_bytes
        if 0 < budget < 1 << 20:
            raise ConfigError(
                f"limits.memory_budget_bytes must be 0 (a share of memory) or at least "
                f"1048576 (1 MiB), got {budget}"
            )
        for name, low, high in _PERCENTS:
            value = getattr(self.limits, name)
            if not low <= value <= high:
                raise ConfigError(f"limits.{name} must be in [{low}, {high}], got {value}")
        if self.limits.min_timeout_ms < MIN_TIMEOUT_MS:
            raise ConfigError(f"limits.min_timeout_ms must be >= {MIN_TIMEOUT_MS}")
        if self.limits.min_timeout_ms > self.limits.max_timeout_ms:
            raise ConfigError("limits.min_timeout_ms must be <= limits.max_timeout_ms")
        if self.limits.max_timeout_ms > MAX_TIMEOUT_MS:
            raise ConfigError(f"limits.max_timeout_ms must be <= {MAX_TIMEOUT_MS} (~10 years)")


_WILDCARDS = ("", "0.0.0.0", "::", "*")


def _same_port(first: str, second: str) -> bool:
    """Whether two ``HOST:PORT`` addresses would bind the same port: the same fixed port on
    the same host, or on hosts of which one is a wildcard (port 0 never collides)."""
    host_a, _, port_a = first.rpartition(":")
    host_b, _, port_b = second.rpartition(":")
    if not port_a.isdigit() or int(port_a) == 0 or port_a != port_b:
        return False
    host_a, host_b = host_a.strip("[]"), host_b.strip("[]")
    return host_a == host_b or host_a in _WILDCARDS or host_b in _WILDCARDS


# The memory budget's percentages and their ranges.
_PERCENTS = (
    ("memory_budget_percent", 1, 100),
    ("retained_memory_percent", 0, 90),
    ("purgatory_memory_percent", 1, 100),
)
_POSITIVE = (
    "max_concurrent_rpcs",
    "max_concurrent_streams",
    "max_pending_requests",
    "max_connections",
    "connection_idle_ms",
    "handshake_timeout_ms",
    "keepalive_time_ms",
    "keepalive_timeout_ms",
    "min_client_ping_interval_ms",
)
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _coerce(name: str, kind: Any, raw: Any) -> Any:
    """Convert a TOML or environment value to the field's type, or raise ConfigError."""
    try:
        if kind in (bool, "bool"):
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in _BOOL_WORDS:
                return _BOOL_WORDS[raw.lower()]
            raise ValueError(raw)
        if kind in (int, "int"):
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError(raw)
            return int(raw)
        if kind in (float, "float"):
            return float(raw)
        if kind in (str, "str"):
            if not isinstance(raw, str):
                raise ValueError(raw)
            return raw
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected {kind}, got {raw!r}") from None
    raise ConfigError(f"{name}: unsupported option type {kind}")


def _merge(obj: Any, values: Mapping[str, Any], where: str) -> Any:
    """A copy of dataclass ``obj`` with scalar ``values`` applied; unknown keys fail."""
    known = {f.name: f for f in fields(obj)}
    changes: dict[str, Any] = {}
    for key, raw in values.items():
        f = known.get(key)
        if f is None or dataclasses.is_dataclass(getattr(obj, key)) or key == "purgatories":
            raise ConfigError(f"unknown option {where}{key}")
        changes[key] = _coerce(f"{where}{key}", f.type, raw)
    return replace(obj, **changes)


def _purgatory(defaults: PurgatorySettings, entry: Any, where: str) -> PurgatorySettings:
    if isinstance(entry, str):
        return replace(defaults, name=entry)
    if not isinstance(entry, dict) or "name" not in entry:
        raise ConfigError(f"{where}: each purgatory needs a name")
    settings: PurgatorySettings = _merge(defaults, entry, f"{where}.")
    return settings


def from_mapping(
    data: Mapping[str, Any],
    base: ServerConfig | None = None,
    env: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Apply a parsed TOML document to ``base`` (the built-in defaults if None).

    ``env`` is where ``[auth]`` tokens given by ``token_env`` are read (os.environ).
    """
    config: ServerConfig = base if base is not None else ServerConfig()
    sections = ("limits", "defaults", "purgatories", "auth", "cluster")
    top = {k: v for k, v in data.items() if k not in sections}
    config = _merge(config, top, "")
    if "auth" in data:
        try:
            auth = parse_auth(data["auth"], os.environ if env is None else env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        config = replace(config, auth=auth)
    if "cluster" in data:
        try:
            config = replace(config, cluster=parse_cluster(data["cluster"], config.cluster))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if "limits" in data:
        config = replace(config, limits=_merge(config.limits, data["limits"], "limits."))
    if "defaults" in data:
        config = replace(config, defaults=_merge(config.defaults, data["defaults"], "defaults."))
    if "purgatories" in data:
        entries = data["purgatories"]
        if not isinstance(entries, list):
            raise ConfigError("purgatories must be an array of names or tables")
        config = replace(
            config,
            purgatories=tuple(
                _purgatory(config.defaults, e, f"purgatories[{i}]") for i, e in enumerate(entries)
            ),
        )
    elif "defaults" in data:
        # The implicit `default` purgatory follows changed defaults.
        config = replace(
            config,
            purgatories=tuple(replace(config.defaults, name=p.name) for p in config.purgatories),
        )
    return config


def apply_env(config: ServerConfig, env: Mapping[str, str]) -> ServerConfig:
    """Apply ``PURGATORY_<OPTION>``, ``PURGATORY_LIMITS_<LIMIT>``, ``PURGATORY_DEFAULTS_<X>``
    and ``PURGATORY_PURGATORIES`` (comma-separated names) from ``env``."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {"limits": {}, "defaults": {}, "cluster": {}}
    names: list[str] | None = None
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX):
            continue
        rest = var[len(ENV_PREFIX) :].lower()
        if rest == "purgatories":
            names = [n.strip() for n in value.split(",") if n.strip()]
            continue
        for section, table in nested.items():
            if rest.startswith(section + "_"):
                table[rest[len(section) + 1 :]] = value
                break
        else:
            if rest in {f.name for f in fields(ServerConfig)}:
                top[rest] = value
    data: dict[str, Any] = dict(top)
    data.update({k: v for k, v in nested.items() if v})
    if names is not None:
        data["purgatories"] = names
    return from_mapping(data, config) if data else config


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ServerConfig:
    """Defaults, then the TOML file at ``path``, then ``env``, then flag ``overrides``."""
    config = ServerConfig()
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        except UnicodeDecodeError as exc:  # TOML is UTF-8 text
            raise ConfigError(
                f"config file {path} is not UTF-8 text (TOML must be): byte "
                f"{exc.object[exc.start]:#04x} at offset {exc.start}"
            ) from exc
        config = from_mapping(data, config, env)
    config = apply_env(config, os.environ if env is None else env)
    if overrides:
        config = from_mapping(overrides, config)
    assert isinstance(config, ServerConfig)
    config.validate()
    return config
