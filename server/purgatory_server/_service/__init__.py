"""The gRPC purgatory service: named purgatories, remote conditions, long-polls, streams.

Module map (one concept each): ``config`` (options), ``errors`` (errors and their status
codes, the one mapping), ``limits`` (request validation), ``conditions`` (declarative
conditions and progress), ``values`` (bounded latest value per key), ``operation``
(the DelayedOperation subclass), ``waiters`` (long-polls as futures), ``inbox``
(thread -> loop hand-off in batches), ``events`` (sequence and retained window),
``subscriptions`` (bounded subscriber buffers), ``journal`` (durability hooks),
``purgatory`` (one named purgatory), ``registry`` (all of them), ``convert`` (protobuf),
``servicer`` (the RPCs), ``app`` (server assembly and shutdown) and the ``telemetry``
package (metrics, traces, log correlation; docs/observability.md).
"""

from purgatory_server._service.app import PurgatoryServer, create_server, serve
from purgatory_server._service.config import (
    ConfigError,
    Limits,
    PurgatorySettings,
    ServerConfig,
    load_config,
)
from purgatory_server._service.journal_hooks import Journal, NullJournal

__all__ = [
    "ConfigError",
    "Journal",
    "Limits",
    "NullJournal",
    "PurgatoryServer",
    "PurgatorySettings",
    "ServerConfig",
    "create_server",
    "load_config",
    "serve",
]
