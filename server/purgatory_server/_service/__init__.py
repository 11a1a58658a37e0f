"""The gRPC purgatory service, in layers from the top down (docs/architecture.md;
tests/service/test_structure.py holds the table):

- ``api``: the gRPC edge, the only importer of grpc: handlers, servicer, Session, status
  mapping, admission, TLS, listen address, server assembly;
- ``workers``: a worker's plan (several processes behind one address), their supervisor;
- (``purgatory_server._cluster``: replicated purgatories on NATS JetStream;)
- ``durable``: the journal hooks over the journal library, recovery, codec and catalog;
- ``wire``: protobuf messages <-> service values, and every request check;
  ``observability``: the OpenTelemetry and Prometheus exporters;
- ``core``: named purgatories, their operations, capacity (loop-confined), composed with
  the features ``groups`` and ``schedules``;
- ``outcomes``: the feed, the one owner of what happens once an operation ended;
- ``telemetry``: the plain counters the service keeps;
- ``config``: server configuration, settings, tokens, logging, process tuning;
- ``model``: the values every layer shares (errors, conditions, definitions, outcomes).

``native_modules`` names the hot path's modules that a compiled build compiles with the
engine (mypyc). Each package's ``__init__`` docstring is its module map. The engine
(``_engine``) and the journal library (``_journal``) sit below all of this and know
nothing of it.
"""

import importlib
from typing import TYPE_CHECKING

from purgatory_server._engine._native import install
from purgatory_server._service.native_modules import MODULES

# Before any of them is imported: whether the hot path's modules load compiled (mypyc).
COMPILED: bool = install(MODULES)

from purgatory_server._service.config.server_config import (  # noqa: E402 (after install)
    ConfigError,
    Limits,
    PurgatorySettings,
    ServerConfig,
    load_config,
)
from purgatory_server._service.core.journal_hooks import JournalHooks, NullHooks  # noqa: E402

if TYPE_CHECKING:
    from purgatory_server._service.api.app import PurgatoryServer, create_server, serve

__all__ = [
    "ConfigError",
    "JournalHooks",
    "Limits",
    "NullHooks",
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
        return getattr(importlib.import_module("purgatory_server._service.api.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
