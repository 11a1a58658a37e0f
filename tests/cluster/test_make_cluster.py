"""``make cluster``'s command starts three NATS nodes and two servers, serves, and stops all.

Runs ``python -m purgatory_server._cluster.local`` (the recipe of ``make cluster``) on any
free ports, waits for ``ready``, uses the replicated purgatory through the *second*
server (whichever owns it, the client is routed), sends SIGTERM, and checks that it exits
0 with every process it started gone.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from purgatory_client import PurgatoryClient
from purgatory_client._models import OperationState

ROOT = Path(__file__).resolve().parents[2]


def test_make_cluster_recipe_runs_the_local_module() -> None:
    recipe = subprocess.run(
        ["make", "-n", "cluster", "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "-m purgatory_server._cluster.local" in recipe


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): read its state.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_local_cluster_serves_and_stops(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "purgatory_server._cluster.local"),
            *("--dir", str(tmp_path), "--port", "0", "--lease-ms", "1500"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"exited early: {lines}"
            lines.append(line.strip())
            if line.startswith("ready"):
                break
        servers = [
            m.group(1) for m in map(re.compile(r"purgatory server\d: (\S+)").match, lines) if m
        ]
        assert len(servers) == 2, lines
        children = [
            int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        ]
        assert len(children) == 5, children  # three nats-server, two purgatory servers
        with PurgatoryClient(servers[1], purgatory="orders", timeout=20) as client:
            status = client.try_complete_else_watch(["k"], 60_000, operation_id="try-1")
            assert status.state is OperationState.WATCHING
            assert client.check_and_complete("k") == 1
            assert client.get_operation("try-1").state is OperationState.COMPLETED
        # Each server lists every purgatory of the cluster: `orders` (one owner) on both.
        for server in servers:
            with PurgatoryClient(server, timeout=20) as client:
                listed = {p.name: p for p in client.list_purgatories()}
                assert "orders" in listed, (server, sorted(listed))
                assert listed["orders"].config.durable
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        rest = proc.stdout.read()
        assert "stopped" in rest, rest
        assert not [pid for pid in children if _alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
