"""Purgatory server processes in a replicated deployment, for the cluster tests.

:class:`ReplicatedServer` runs ``python -m purgatory_server`` with a ``[cluster]`` table
naming the test's NATS cluster and replicated purgatory (and, where placement matters, a
server id from :func:`by_rank`, so the test knows who should own it) under the tests' and
benchmarks' harness (:class:`harness.ServerProcess`): it learns its port from
``--port-file`` and can be SIGKILLed, SIGSTOPped and resumed. Each test names its own
purgatory, so tests share one NATS cluster (starting one costs ~5 s of leader election).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import nats.errors
from nats.js.api import StorageType, StreamConfig
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._cluster.placement import ranked

from harness import ServerProcess

LEASE_MS = 1500


def by_rank(name: str, count: int) -> list[str]:
    """``count`` server ids, best first for purgatory ``name`` by the servers' own rule."""
    return ranked(name, [f"id{i}" for i in range(count)])


def config_text(
    urls: list[str],
    name: str,
    data_dir: Path,
    lease_ms: int = LEASE_MS,
    *,
    server_id: str = "",
    retained_events: int = 100_000,
    dedup_window_ms: int | None = None,
    cluster_extra: str = "",
) -> str:
    quoted = ", ".join(f'"{u}"' for u in urls)
    dedup = "" if dedup_window_ms is None else f"dedup_window_ms = {dedup_window_ms}\n"
    return f"""data_dir = "{data_dir}"
log_level = "INFO"

[defaults]
retained_events = {retained_events}
{dedup}
[[purgatories]]
name = "{name}"
durable = true

[cluster]
nats_urls = [{quoted}]
replicated = ["{name}"]
lease_ms = {lease_ms}
journal_streams = 2
server_id = "{server_id}"
{cluster_extra}"""


class ReplicatedServer(ServerProcess):
    """One server process (see module docstring), started at once; bounded waits
    everywhere (:class:`harness.ServerProcess`), its log in ``<root>/<label>.log``."""

    def __init__(
        self,
        root: Path,
        label: str,
        urls: list[str],
        name: str,
        server_id: str = "",
        **config: Any,
    ) -> None:
        text = config_text(urls, name, root / f"{label}-data", server_id=server_id, **config)
        super().__init__(root, label=label, config=text)
        self.name = name
        self.start()


def stub(address: str) -> tuple[grpc.aio.Channel, Any]:
    channel = grpc.aio.insecure_channel(address)
    return channel, pb_grpc.PurgatoryServiceStub(channel)


async def wait_owner(servers: list[ReplicatedServer], name: str, timeout_s: float) -> int:
    """Index of the server that answers GetPurgatory-like calls for ``name``."""
    import asyncio

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for i, server in enumerate(servers):
            if not server.running or not server.port:
                continue
            channel, client = stub(server.address)
            try:
                await client.GetPurgatory(pb.GetPurgatoryRequest(name=name), timeout=1.0)
                return i
            except grpc.aio.AioRpcError:
                pass
            finally:
                await channel.close()
        await asyncio.sleep(0.05)
    raise AssertionError(f"no server serves {name} after {timeout_s}s")


async def add_r3_stream(js: Any, name: str, subjects: list[str]) -> None:
    """Create a three-replica file stream, retrying while a fresh cluster elects leaders."""
    import asyncio

    for _ in range(100):
        try:
            await js.add_stream(
                StreamConfig(name=name, subjects=subjects, num_replicas=3, storage=StorageType.FILE)
            )
            return
        except nats.errors.TimeoutError:
            await asyncio.sleep(0.2)
