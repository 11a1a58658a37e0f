"""One three-node NATS JetStream cluster (nats-server 2.15.1 from PyPI) for the cluster tests.

Started once per test session on free loopback ports in a temporary directory (a new
cluster spends ~5 s electing its JetStream meta leader) and killed at the end. Tests name
their own purgatories, so they never see each other's streams or leases.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("nats", reason="the cluster extra (nats-py) is not installed")

from purgatory_server._cluster.natsd import LocalNatsCluster


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNatsCluster]:
    cluster = LocalNatsCluster(tmp_path_factory.mktemp("nats")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
