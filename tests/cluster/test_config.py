"""The ``[cluster]`` table: parsed, validated with one-line errors, off by default."""

from __future__ import annotations

import pytest
from purgatory_server._service.config.server_config import ConfigError, from_mapping, load_config

BASE = {"purgatories": [{"name": "orders", "durable": True}, "scratch"]}


def test_cluster_is_off_by_default() -> None:
    config = load_config(env={})
    assert not config.cluster.enabled
    assert config.cluster.replicated == ()


def test_cluster_table_is_parsed() -> None:
    config = from_mapping(
        {
            **BASE,
            "cluster": {
                "nats_urls": ["nats://127.0.0.1:4222"],
                "replicated": ["orders"],
                "lease_ms": 2000,
                "advertise": "10.0.0.5:50051",
            },
        }
    )
    config.validate()
    assert config.cluster.enabled
    assert config.cluster.replicated == ("orders",)
    assert config.cluster.lease_ms == 2000
    assert config.cluster.advertise == "10.0.0.5:50051"


def test_cluster_from_the_environment() -> None:
    env = {
        "PURGATORY_CLUSTER_NATS_URLS": "nats://a:4222,nats://b:4222",
        "PURGATORY_CLUSTER_LEASE_MS": "1500",
        "PURGATORY_CLUSTER_SNAPSHOT_MESSAGES": "500",
    }
    config = load_config(env=env)
    assert config.cluster.snapshot_messages == 500
    assert config.cluster.snapshot_bytes == 64 * 1024 * 1024
    assert config.cluster.nats_urls == ("nats://a:4222", "nats://b:4222")
    assert config.cluster.lease_ms == 1500


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"replicated": ["orders"]}, "cluster.replicated needs cluster.nats_urls"),
        ({"nats_urls": ["nats://x:1"], "replicated": ["nope"]}, "not a configured purgatory"),
        ({"nats_urls": ["nats://x:1"], "replicated": ["scratch"]}, "needs durable = true"),
        ({"nats_urls": ["nats://x:1"], "lease_ms": 10}, "cluster.lease_ms must be >= 300"),
        ({"nats_urls": ["nats://x:1"], "lease_ms": "soon"}, "cluster.lease_ms must be an integer"),
        ({"nats_url": ["nats://x:1"]}, "unknown option cluster.nats_url"),
        ({"nats_urls": "nats://x:1", "replicas": 9}, "cluster.replicas must be in [1, 5]"),
        ({"snapshot_messages": -1}, "cluster.snapshot_messages must be >= 0"),
        ({"snapshot_bytes": 1.5}, "cluster.snapshot_bytes must be an integer"),
    ],
)
def test_bad_cluster_options_are_one_line_errors(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        from_mapping({**BASE, "cluster": table}).validate()
