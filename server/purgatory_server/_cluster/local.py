"""``make cluster``: a replicated deployment on loopback to try, stopped with Ctrl-C.

Starts three ``nats-server`` processes (JetStream, ``sync_interval: always``, R3) and two
purgatory servers (ids ``server1`` and ``server2``, started in that order) that both name
the replicated durable purgatory ``orders``: ``server1``, which rendezvous placement ranks
first for ``orders``, owns it, the other stands by, and either answers for it (the standby with
UNAVAILABLE + ``purgatory-owner``, which the Python clients follow). Everything lives
under ``--dir`` (configs, logs, NATS stores, data directories) and is kept after exit.

Usage::

    python -m purgatory_server._cluster.local [--dir .cluster] [--port 50051]

prints one line per process and ``ready`` once both servers serve, then waits for
SIGINT/SIGTERM and stops the purgatory servers (SIGTERM, graceful) and the NATS nodes.
Try: ``purgatory --target 127.0.0.1:50052 --purgatory orders watch k --timeout-ms 60000``
on the standby, kill the owner, and watch the standby take over.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from purgatory_server._cluster.natsd import LocalNatsCluster

__all__ = ["main"]

PURGATORY = "orders"


def _config(urls: list[str], data_dir: Path, lease_ms: int, server_id: str) -> str:
    quoted = ", ".join(f'"{u}"' for u in urls)
    return f"""data_dir = "{data_dir}"

[[purgatories]]
name = "{PURGATORY}"
durable = true

[cluster]
nats_urls = [{quoted}]
replicated = ["{PURGATORY}"]
lease_ms = {lease_ms}
server_id = "{server_id}"
"""


def _spawn(
    root: Path, label: str, urls: list[str], port: int, lease_ms: int
) -> tuple[subprocess.Popen[bytes], Path]:
    conf = root / f"{label}.toml"
    conf.write_text(_config(urls, root / f"{label}-data", lease_ms, label))
    port_file = root / f"{label}.port"
    port_file.unlink(missing_ok=True)
    log = (root / f"{label}.log").open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "purgatory_server",
            "--config",
            str(conf),
            "--listen",
            f"127.0.0.1:{port}",
            "--port-file",
            str(port_file),
        ],
        stdout=log,
        stderr=log,
    )
    log.close()
    return proc, port_file


def _wait_port(proc: subprocess.Popen[bytes], port_file: Path, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_file.exists():
            return int(port_file.read_text())
        if proc.poll() is not None:
            raise RuntimeError(f"purgatory server exited with {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError("purgatory server did not start in time")


def _wait_owner(proc: subprocess.Popen[bytes], log: Path, since: int, timeout_s: float) -> None:
    """Until the server's log says it owns the purgatory (node.py logs it once it serves).

    Read from the log, not over gRPC: only the gRPC edge talks gRPC. ``since`` is the
    log's size before the server started, so earlier runs' lines do not count.
    """
    needle = f" owns purgatory {PURGATORY} ".encode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(since)
            if needle in f.read():
                return
        if proc.poll() is not None:
            raise RuntimeError(f"purgatory server exited with {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError(f"no server owns {PURGATORY!r}")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=".cluster", help="where everything is kept")
    parser.add_argument(
        "--port", type=int, default=50051, help="first server's port; the second gets +1 (0: any)"
    )
    parser.add_argument("--lease-ms", type=int, default=3000, help="owner lease")
    args = parser.parse_args(argv)
    root = Path(args.dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    nats = LocalNatsCluster(root / "nats")
    servers: list[subprocess.Popen[bytes]] = []
    try:
        nats.start()
        for node in nats.nodes:
            _say(f"nats-server {node.name}: {node.url} (log {root / 'nats' / node.name}.log)")
        for i in range(2):  # one after the other: server1 is a member before server2 starts
            port = args.port + i if args.port else 0
            log = root / f"server{i + 1}.log"
            since = log.stat().st_size if log.exists() else 0
            proc, port_file = _spawn(root, f"server{i + 1}", nats.urls, port, args.lease_ms)
            servers.append(proc)
            bound = _wait_port(proc, port_file, 90.0)
            if i == 0:  # the owner first: the standby then learns it as it starts
                _wait_owner(proc, log, since, 90.0)
            _say(
                f"purgatory server{i + 1}: 127.0.0.1:{bound} "
                f"(pid {proc.pid}, log {root}/server{i + 1}.log)"
            )
        _say(f"ready: replicated purgatory {PURGATORY!r}; Ctrl-C stops everything")
        # Until both servers are gone: killing the owner is what the cluster is for.
        while any(p.poll() is None for p in servers):
            time.sleep(0.2)
        _say("both purgatory servers exited; stopping")
        return 1
    except KeyboardInterrupt:
        _say("stopping")
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for proc in servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        nats.stop()
        _say("stopped")


if __name__ == "__main__":
    sys.exit(main())
