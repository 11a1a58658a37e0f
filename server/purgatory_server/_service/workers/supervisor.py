"""The supervisor of ``workers = N``: one address, N ordinary servers, restarts.

It imports no grpc and serves no RPC itself (only, with ``metrics_listen``, the whole
server's metrics: :mod:`.metrics_gather`). For its whole life it *reserves* the shared
port and one own port per worker with a bound, not listening, SO_REUSEPORT socket:
``listen`` port 0 becomes a concrete port every worker can share, and a restarted worker
finds its own port free. The kernel never hands connections to a reserving socket.

Each worker is ``python -m purgatory_server`` with the supervisor's arguments plus
``--worker-index``, ``--worker-ports``, its own port file, its own error file (where it
writes why it could not start) and the directory of run-time purgatory definitions
(:mod:`.kept_purgatories`), which outlives every worker. The supervisor writes
``port_file`` once every worker serves; if one exits first, it stops the others and its
last line quotes that worker's own reason (``cannot start: worker 0: ...``), not only
its exit status. A worker that exits while the supervisor is not stopping is started
again (with a doubling pause while it keeps dying young) and recovers its durable
purgatories from their journals. SIGTERM/SIGINT stop every worker gracefully, then the
supervisor exits 0. Thread-safety: one thread (the main one) runs it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from purgatory_server._service.config.server_config import ServerConfig
from purgatory_server._service.workers.metrics_gather import MetricsGather

__all__ = ["Supervisor", "reserve_port"]

logger = logging.getLogger("purgatory_server.workers")

START_TIMEOUT_S = 60.0
POLL_S = 0.05
MAX_BACKOFF_S = 5.0
# A worker that lived this long before dying is restarted at once.
YOUNG_S = 10.0


def reserve_port(host: str, port: int) -> socket.socket:
    """A bound, not listening, SO_REUSEPORT socket on ``host:port`` (0: any free port)."""
    family, kind, proto, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
    except OSError:
        sock.close()
        raise
    return sock


class _Worker:
    """One worker process and its restart bookkeeping."""

    def __init__(self, index: int, argv: list[str], port_file: Path, error_file: Path) -> None:
        self.index = index
        self.argv = argv
        self.port_file = port_file
        self.error_file = error_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.backoff_s = 0.0
        self.due = 0.0  # when a dead worker is started again

    def start(self) -> None:
        self.port_file.unlink(missing_ok=True)
        self.error_file.unlink(missing_ok=True)
        self.started = time.monotonic()
        # Its telemetry's resource names it (OpenTelemetry reads this variable): OTLP
        # exports carry `purgatory.worker`, Prometheus's target_info `purgatory_worker`.
        env = dict(os.environ)
        own = f"purgatory.worker={self.index}"
        earlier = env.get("OTEL_RESOURCE_ATTRIBUTES")
        env["OTEL_RESOURCE_ATTRIBUTES"] = f"{earlier},{own}" if earlier else own
        self.proc = subprocess.Popen(self.argv, env=env)  # stdout/stderr inherited: one log

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def failed_at(self) -> float:
        """When it wrote its error file (inf if it wrote none)."""
        try:
            return self.error_file.stat().st_mtime
        except FileNotFoundError:
            return float("inf")

    def failure(self, code: int) -> str:
        """Why it exited with ``code`` before serving: its own reason if it wrote one."""
        try:
            reason = self.error_file.read_text(errors="replace").strip()
        except FileNotFoundError:
            reason = ""
        if reason:
            return f"worker {self.index}: {reason}"
        return f"worker {self.index} exited with {code}"

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)


class Supervisor:
    """Runs ``count`` workers of the server started with ``argv`` (see module docstring)."""

    def __init__(self, argv: Sequence[str], config: ServerConfig, count: int) -> None:
        self._argv = list(argv)
        self._config = config
        self._count = count
        self._stopping = False
        self._metric_ports: list[int] = []

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self._stopping = True

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT; the exit status (1 if the workers never served)."""
        host = self._config.listen.rsplit(":", 1)[0].strip("[]")
        port = int(self._config.listen.rsplit(":", 1)[1])
        reserved: list[socket.socket] = []
        try:
            reserved.append(reserve_port(host, port))
            reserved += [reserve_port(host, 0) for _ in range(self._count)]
        except OSError as exc:  # a busy port: one line, as a single server reports it
            for sock in reserved:
                sock.close()
            logger.error("cannot start: cannot listen on %s: %s", self._config.listen, exc.strerror)
            return 1
        ports = [s.getsockname()[1] for s in reserved]
        try:
            gather = self._gather()
        except OSError as exc:  # its address taken: one line, as for the listen address
            for sock in reserved:
                sock.close()
            metrics = self._config.metrics_listen
            logger.error(
                "cannot start: cannot serve metrics on %s: %s", metrics, exc.strerror or exc
            )
            return 1
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        with tempfile.TemporaryDirectory(prefix="purgatory-workers-") as tmp:
            (Path(tmp) / "definitions").mkdir()  # run-time purgatories (kept_purgatories.py)
            workers = [self._worker(i, host, ports, Path(tmp)) for i in range(self._count)]
            try:
                failure = self._serve(workers, host, ports)
            finally:
                self._stop_all(workers)
                if gather is not None:
                    gather.stop()
                for sock in reserved:
                    sock.close()
        if failure is not None:  # the last line says why, after the others' stop lines
            logger.error("cannot start: %s", failure)
            return 1
        return 0

    def _serve(self, workers: list[_Worker], host: str, ports: list[int]) -> str | None:
        """Start the workers and restart them until asked to stop; why they did not all
        serve, if they did not (None when stopped, even while starting)."""
        for worker in workers:
            worker.start()
        failure = self._wait_serving(workers)
        if failure is not None or self._stopping:
            return None if self._stopping else failure
        self._write_port_file(ports[0])
        own = ", ".join(str(p) for p in ports[1:])
        logger.info(
            "supervisor: %d workers serving on %s:%d (own ports %s)",
            self._count,
            host,
            ports[0],
            own,
        )
        self._watch(workers)
        return None

    def _gather(self) -> MetricsGather | None:
        """The whole server's metrics endpoint (None if none is configured; OSError if its
        address is taken). Workers serve theirs on loopback ports picked here and kept
        across restarts."""
        if not self._config.metrics_listen:
            return None
        for _ in range(self._count):
            with socket.socket() as probe:  # a free loopback port for each worker
                probe.bind(("127.0.0.1", 0))
                self._metric_ports.append(probe.getsockname()[1])
        gather = MetricsGather(self._config.metrics_listen, dict(enumerate(self._metric_ports)))
        port = gather.start()
        logger.info(
            "metrics: http://%s:%d/metrics (every worker's, labelled purgatory_worker)",
            self._config.metrics_listen.rpartition(":")[0],
            port,
        )
        return gather

    def _worker(self, index: int, host: str, ports: list[int], tmp: Path) -> _Worker:
        port_file = tmp / f"worker-{index}.port"
        error_file = tmp / f"worker-{index}.error"
        listen_host = f"[{host}]" if ":" in host else host
        argv = [sys.executable, "-m", "purgatory_server", *self._argv]
        argv += ["--listen", f"{listen_host}:{ports[0]}", "--port-file", str(port_file)]
        argv += ["--worker-index", str(index), "--worker-ports", ",".join(map(str, ports))]
        argv += ["--worker-error-file", str(error_file)]
        argv += ["--worker-definitions", str(tmp / "definitions")]
        if self._metric_ports:  # gathered by the supervisor's endpoint (metrics_gather)
            argv += ["--metrics-listen", f"127.0.0.1:{self._metric_ports[index]}"]
        return _Worker(index, argv, port_file, error_file)

    def _wait_serving(self, workers: list[_Worker]) -> str | None:
        """Wait until every worker serves (None) or one exits first (why, the first
        worker's to fail where several did in one poll: its error file was written
        first)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        waiting = list(workers)
        while waiting and not self._stopping:
            failed: list[tuple[float, str]] = []
            for worker in list(waiting):
                if worker.port_file.exists():
                    waiting.remove(worker)
                elif (code := worker.exited()) is not None:
                    failed.append((worker.failed_at(), worker.failure(code)))
            if failed:
                return min(failed)[1]
            if time.monotonic() > deadline:
                return f"workers did not serve in {START_TIMEOUT_S:.0f} s"
            time.sleep(POLL_S)
        return None

    def _write_port_file(self, port: int) -> None:
        if self._config.port_file:
            tmp = Path(self._config.port_file + ".tmp")
            tmp.write_text(f"{port}\n")
            tmp.replace(self._config.port_file)  # readers never see a half-written file

    def _watch(self, workers: list[_Worker]) -> None:
        """Restart workers that die, until asked to stop."""
        while not self._stopping:
            now = time.monotonic()
            for worker in workers:
                if worker.due:
                    if now >= worker.due:
                        worker.due = 0.0
                        worker.start()
                    continue
                code = worker.exited()
                if code is None:
                    continue
                young = now - worker.started < YOUNG_S
                worker.backoff_s = min(MAX_BACKOFF_S, worker.backoff_s * 2 or 0.1) if young else 0
                worker.due = now + worker.backoff_s
                logger.warning(
                    "worker %d exited with %d; restarting in %.1f s",
                    worker.index,
                    code,
                    worker.backoff_s,
                )
            time.sleep(POLL_S)

    def _stop_all(self, workers: list[_Worker]) -> None:
        for worker in workers:
            worker.signal(signal.SIGCONT)
            worker.signal(signal.SIGTERM)
        deadline = time.monotonic() + self._config.grace_s + 10
        for worker in workers:
            if worker.proc is None:
                continue
            try:
                worker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait(10)
        logger.info("supervisor: workers stopped")
