"""Builds the cluster node on demand: the only cluster module the server always imports.

A configuration without ``[cluster] nats_urls`` never imports the NATS client; one with
it needs the ``cluster`` extra, and its absence is a one-line configuration error.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from typing import TYPE_CHECKING

from purgatory_server._engine.time import Time
from purgatory_server._service.config.server_config import ConfigError, ServerConfig

if TYPE_CHECKING:
    from purgatory_server._cluster.node import ClusterNode

__all__ = ["cluster_node"]


def cluster_node(
    config: ServerConfig, loop: asyncio.AbstractEventLoop, clock: Time | None
) -> ClusterNode | None:
    """The node of this server's replicated purgatories, or None without ``[cluster]``."""
    if not config.cluster.enabled:
        return None
    if importlib.util.find_spec("nats") is None:
        raise ConfigError(
            "[cluster] nats_urls needs the NATS client: pip install 'purgatory-grpc[cluster]'"
        )
    module = importlib.import_module("purgatory_server._cluster.node")
    node: ClusterNode = module.ClusterNode(config, loop, clock)
    return node
