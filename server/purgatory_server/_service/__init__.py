"""The gRPC purgatory service: named purgatories, remote conditions, long-polls, streams.

Module map (one concept each): ``config`` (options), ``errors`` (plain service errors,
no grpc), ``status`` (their gRPC status codes and details: the one mapping, edge only),
``validation`` (every request check), ``conditions`` (declarative conditions and
progress), ``values`` (bounded latest value per key), ``operation`` (the DelayedOperation
subclass), ``operation_table`` (pending and finished operations by id), ``inbox`` (thread
-> loop hand-off in batches), ``events`` (outcomes and the retained window),
``subscriptions`` (bounded subscriber buffers), ``feed`` (the one owner of outcomes:
sequences, window, subscribers, long-poll waiters), ``journal_hooks`` (durability hooks),
``named_purgatory`` (one named purgatory), ``registry`` (all of them), ``convert``
(responses and events as protobuf), ``servicer`` and ``session`` (the RPCs), ``edge``
(decoding, auth, last-resort status), ``app`` (server assembly and shutdown) and the
``telemetry`` package (metrics, traces, log correlation; docs/observability.md). The
threads they run on: docs/architecture.md.
"""

import importlib
from typing import TYPE_CHECKING

from purgatory_server._service.config import (
    ConfigError,
    Limits,
    PurgatorySettings,
    ServerConfig,
    load_config,
)
from purgatory_server._service.journal_hooks import Journal, NullJournal

if TYPE_CHECKING:
    from purgatory_server._service.app import PurgatoryServer, create_server, serve

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

# The server (and with it grpc) loads on first use, so the core (named purgatories, the
# feed, validation, errors) can be imported and tested without the gRPC edge.
_SERVER_NAMES = frozenset({"PurgatoryServer", "create_server", "serve"})


def __getattr__(name: str) -> object:
    if name in _SERVER_NAMES:
        return getattr(importlib.import_module("purgatory_server._service.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
