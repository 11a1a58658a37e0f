"""The metrics endpoint and the gRPC server need a port each: a configuration that names
the same fixed port for both (the same host, or one of them a wildcard) is refused."""

from __future__ import annotations

import re

import pytest
from purgatory_server._service.config.server_config import ConfigError, ServerConfig


@pytest.mark.parametrize(
    ("listen", "metrics"),
    [
        ("127.0.0.1:50064", "127.0.0.1:50064"),
        ("127.0.0.1:50064", "0.0.0.0:50064"),
        ("0.0.0.0:50064", "127.0.0.1:50064"),
        ("[::]:50064", "[::1]:50064"),
    ],
)
def test_the_same_port_for_both_is_refused(listen: str, metrics: str) -> None:
    expected = re.escape(f"metrics_listen {metrics} takes the port of listen {listen}")
    with pytest.raises(ConfigError, match=expected):
        ServerConfig(listen=listen, metrics_listen=metrics).validate()


@pytest.mark.parametrize(
    ("listen", "metrics"),
    [
        ("127.0.0.1:50064", "127.0.0.1:9464"),
        ("127.0.0.1:0", "127.0.0.1:0"),
        ("127.0.0.1:50064", "127.0.0.2:50064"),
    ],
)
def test_distinct_ports_or_hosts_are_accepted(listen: str, metrics: str) -> None:
    ServerConfig(listen=listen, metrics_listen=metrics).validate()
