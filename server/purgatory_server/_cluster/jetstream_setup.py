"""Creating what replicated purgatories need in JetStream, idempotently, at start-up.

The journal streams (``PURGATORY_J<k>``, file storage, ``replicas`` replicas, a 2-minute
de-duplication window for re-sent appends), the lease bucket (TTL = the lease), the
meta bucket (incarnations) and the members bucket (TTL = the lease, placement). Every
server does this at start; a second creation with the same configuration is a no-op, and
one with another configuration keeps the existing one (logged). A fresh JetStream cluster
has no meta leader for its first seconds, so each call is retried until
:data:`SETUP_TIMEOUT_S` (the caller's bound), as is a bucket that another server created
a moment ago and this node does not show yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import nats.errors
import nats.js.errors
from nats.js.api import KeyValueConfig, StorageType, StreamConfig

from purgatory_server._cluster.layout import (
    LEASE_BUCKET,
    MEMBERS_BUCKET,
    META_BUCKET,
    stream_subjects,
)
from purgatory_server._service.config.cluster_config import ClusterConfig

__all__ = ["SETUP_TIMEOUT_S", "ensure_layout", "ensure_members"]

logger = logging.getLogger("purgatory_server.cluster")

SETUP_TIMEOUT_S = 60.0  # a fresh JetStream cluster has no meta leader at first


async def ensure_layout(js: Any, cluster: ClusterConfig, lease_s: float) -> tuple[Any, Any, float]:
    """Create the streams and buckets if needed; return the (lease, meta) KV handles and
    the lease in seconds: the lease bucket's TTL, which wins over ``lease_s`` when the
    bucket was created earlier with another one (every server must time leases alike)."""
    for k in range(cluster.journal_streams):
        config = StreamConfig(
            name=f"PURGATORY_J{k}",
            subjects=stream_subjects(k),
            num_replicas=cluster.replicas,
            storage=StorageType.FILE,
            duplicate_window=120.0,
        )
        await _retry(lambda c=config: js.add_stream(c))  # type: ignore[misc]
    owners = KeyValueConfig(bucket=LEASE_BUCKET, ttl=lease_s, replicas=cluster.replicas, history=1)
    meta = KeyValueConfig(bucket=META_BUCKET, replicas=cluster.replicas, history=1)
    await _retry(lambda: js.create_key_value(owners))
    await _retry(lambda: js.create_key_value(meta))
    owners_kv = await _retry(lambda: js.key_value(LEASE_BUCKET))
    meta_kv = await _retry(lambda: js.key_value(META_BUCKET))
    info = await _retry(lambda: js.stream_info(f"KV_{LEASE_BUCKET}"))
    ttl = float(info.config.max_age or 0.0)
    if ttl and abs(ttl - lease_s) > 1e-3:
        logger.warning(
            "cluster: bucket %s keeps leases for %.3fs, not lease_ms %d: using %.3fs",
            LEASE_BUCKET,
            ttl,
            round(lease_s * 1000),
            ttl,
        )
        lease_s = ttl
    return owners_kv, meta_kv, lease_s


async def ensure_members(js: Any, cluster: ClusterConfig, lease_s: float) -> Any:
    """Create the members bucket (TTL = the lease) if needed; its KV."""
    members = KeyValueConfig(
        bucket=MEMBERS_BUCKET, ttl=lease_s, replicas=cluster.replicas, history=1
    )
    await _retry(lambda: js.create_key_value(members))
    return await _retry(lambda: js.key_value(MEMBERS_BUCKET))


async def _retry(call: Callable[[], Any]) -> Any:
    """Run a JetStream admin call until it succeeds (the meta leader may not exist yet)."""
    delay = 0.1
    while True:
        try:
            return await call()
        except (
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
            # A stream another server has just created may not be visible here yet.
            nats.js.errors.NotFoundError,
            nats.js.errors.ServiceUnavailableError,
        ) as exc:
            logger.info("cluster: JetStream not ready (%s); retrying", type(exc).__name__)
        except Exception as exc:
            # "stream name already in use with a different configuration": keep the old one.
            if "already in use" in str(exc):
                logger.warning("cluster: keeping the existing %s", exc)
                return None
            # A fresh cluster's meta leader may not know every peer yet (error 10005).
            if "no suitable peers" not in str(exc):
                raise
            logger.info("cluster: JetStream peers not known yet; retrying")
        await asyncio.sleep(delay)
        delay = min(1.0, delay * 2)
