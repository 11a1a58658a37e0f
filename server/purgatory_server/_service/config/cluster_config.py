"""The ``[cluster]`` table: which purgatories replicate to NATS JetStream, and how.

Off by default (no ``nats_urls``): the local journal stays the embedded default and nothing
here imports the NATS client. Example (docs/scale-out.md)::

    [cluster]
    nats_urls = ["nats://127.0.0.1:4222", "nats://127.0.0.1:4223", "nats://127.0.0.1:4224"]
    replicated = ["orders"]        # configured purgatories with durable = true
    advertise = "10.0.0.5:50051"   # what clients are told to dial (default: listen + port)
    lease_ms = 3000

Pure data and validation: built once at start-up, frozen, read from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterConfig", "parse_cluster"]


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Replication settings shared by every replicated purgatory of this server."""

    # NATS servers of the JetStream cluster; empty: no replication.
    nats_urls: tuple[str, ...] = ()
    # Names of configured durable purgatories that replicate (owner + standbys).
    replicated: tuple[str, ...] = ()
    # host:port clients are told to dial to reach this server; "" = listen host + port.
    advertise: str = ""
    # Stable id of this server in leases and placement; "" = the advertised address.
    server_id: str = ""
    # Owner lease: a lost owner is replaced this long after its last renewal.
    lease_ms: int = 3000
    # JetStream replicas of the journal streams and the lease bucket (1 for a toy cluster).
    replicas: int = 3
    # Journal streams purgatories are spread over (one Raft group each).
    journal_streams: int = 4
    # Longest time one append may take (its retries included) before the RPCs fail.
    append_timeout_ms: int = 20_000
    # A snapshot of a purgatory's subject is written (and what it covers purged) once the
    # subject grew by this many messages / bytes since the last one (0: that trigger off).
    snapshot_messages: int = 10_000
    snapshot_bytes: int = 64 * 1024 * 1024

    @property
    def enabled(self) -> bool:
        return bool(self.nats_urls)

    def validate(self, durable_names: Mapping[str, bool]) -> None:
        """Raise ValueError naming the option; ``durable_names``: configured purgatories."""
        if self.replicated and not self.nats_urls:
            raise ValueError("cluster.replicated needs cluster.nats_urls")
        for name in self.replicated:
            if name not in durable_names:
                raise ValueError(f"cluster.replicated: {name!r} is not a configured purgatory")
            if not durable_names[name]:
                raise ValueError(f"cluster.replicated: purgatory {name!r} needs durable = true")
        if self.lease_ms < 300:
            raise ValueError(f"cluster.lease_ms must be >= 300, got {self.lease_ms}")
        if not 1 <= self.replicas <= 5:
            raise ValueError(f"cluster.replicas must be in [1, 5], got {self.replicas}")
        if not 1 <= self.journal_streams <= 64:
            raise ValueError(
                f"cluster.journal_streams must be in [1, 64], got {self.journal_streams}"
            )
        for key in ("snapshot_messages", "snapshot_bytes"):
            if getattr(self, key) < 0:
                raise ValueError(f"cluster.{key} must be >= 0, got {getattr(self, key)}")
        if self.append_timeout_ms < 100:
            raise ValueError(
                f"cluster.append_timeout_ms must be >= 100, got {self.append_timeout_ms}"
            )


_INTEGERS = frozenset(
    name for name, value in ClusterConfig.__dataclass_fields__.items() if value.type == "int"
)


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, Sequence) or not all(isinstance(x, str) for x in raw):
        raise ValueError(f"{where} must be an array of strings")
    return tuple(raw)


def parse_cluster(raw: Any, base: ClusterConfig | None = None) -> ClusterConfig:
    """The ``[cluster]`` table (or ``PURGATORY_CLUSTER_*`` values) over ``base``."""
    if not isinstance(raw, Mapping):
        raise ValueError("cluster must be a table")
    current = base if base is not None else ClusterConfig()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("nats_urls", "replicated"):
            values[key] = _strings(value, f"cluster.{key}")
        elif key in ("advertise", "server_id"):
            if not isinstance(value, str):
                raise ValueError(f"cluster.{key} must be a string")
            values[key] = value
        elif key in _INTEGERS:
            try:
                if isinstance(value, (bool, float)):
                    raise ValueError(value)
                values[key] = int(value)
            except (TypeError, ValueError):
                raise ValueError(f"cluster.{key} must be an integer, got {value!r}") from None
        else:
            raise ValueError(f"unknown option cluster.{key}")
    return ClusterConfig(
        **{
            name: values.get(name, getattr(current, name))
            for name in ClusterConfig.__dataclass_fields__
        }
    )
