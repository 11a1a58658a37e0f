"""One server process on loopback, started and stopped under bounds.

:class:`ServerProcess` runs a server command (``python -m purgatory_server`` unless told
otherwise) with ``--listen 127.0.0.1:<port> --port-file <file>`` appended. The server binds
port 0 the first time, so no other process can take the port between a choice and the
bind (the race every "find a free port, then start" helper has), and writes the bound
port to the file once it serves; :meth:`ServerProcess.wait_port` polls for that file,
bounded, and fails at once if the process exits first. A restart (after :meth:`stop` or
:meth:`kill`) binds the port the first start reported, so clients reconnect to the same
address, as they would to a restarted production server. (gRPC channels of one process
share a connection per address, which backs off after the server went away: serving is
not yet answering *this process's* next call at once; wait for an answer where it matters.)

Everything the process writes (stdout and stderr) goes to ``<root>/<label>.log``, kept
after it exits; every failure quotes the log's tail. The process runs in ``root`` (its own
directory) unless ``cwd`` says otherwise: a server's relative defaults (``--data-dir``
``./data``) then never reach the checkout's ``./data``, which a user who followed the
README has filled. :meth:`stop` is SIGTERM (the graceful
shutdown), then SIGKILL after ``grace_s``. The environment is the caller's without its
``PURGATORY_*`` variables (a developer's shell must not change what a test or a benchmark
runs), plus ``env``, with this checkout last on ``PYTHONPATH`` (see :class:`ServerProcess`).

Thread-safety: none; one thread owns a ServerProcess.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = [
    "PURGATORY_SERVER",
    "ServerError",
    "ServerProcess",
    "cpu_seconds",
    "free_port",
    "rss_bytes",
    "serving",
]

PURGATORY_SERVER: tuple[str, ...] = (sys.executable, "-m", "purgatory_server")
CHECKOUT = Path(__file__).resolve().parent.parent  # (bench/ and harness/ live here)
# The port file is polled this often: often enough that a benchmark timing spawn ->
# serving (recovery) is not rounded up by much, cheap enough (one stat) to not matter.
POLL_S = 0.005
TAIL_CHARS = 3000


class ServerError(RuntimeError):
    """A server process did not start, or exited while it was expected to serve."""


class ServerProcess:
    """``command + args + --listen 127.0.0.1:PORT --port-file FILE``; see the module doc.

    ``config`` is TOML text, written to ``<root>/<label>.toml`` and passed as ``--config``.
    ``port`` 0 (the default) lets the server choose; after :meth:`wait_port` it holds the
    bound port, which later starts reuse. Use as ``with ServerProcess(...) as server:``
    (start, wait for the port, stop on exit) or call :meth:`start`, :meth:`wait_port` and
    :meth:`stop` yourself, e.g. to start several servers before waiting for any.
    """

    def __init__(
        self,
        root: Path,
        args: Sequence[str] = (),
        *,
        label: str = "server",
        command: Sequence[str] = PURGATORY_SERVER,
        config: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        port: int = 0,
        start_timeout_s: float = 30.0,
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.label = label
        self.port = port
        self.port_file = root / f"{label}.port"
        self.log_path = root / f"{label}.log"
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s = float("nan")  # spawn -> port file, of the latest start
        self._argv = [*command]
        if config is not None:
            config_path = root / f"{label}.toml"
            config_path.write_text(config)
            self._argv += ["--config", str(config_path)]
        self._argv += args
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
        self._env.update(env or {})
        # Run from its own directory, a command that is a module of this checkout
        # (``-m bench._lateness_server``) still finds it: the checkout goes last on the path.
        path = [p for p in self._env.get("PYTHONPATH", "").split(os.pathsep) if p]
        self._env["PYTHONPATH"] = os.pathsep.join([*path, str(CHECKOUT)])
        self._cwd = root if cwd is None else cwd
        self._spawned = 0.0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ServerProcess:
        """Spawn the process (on the port of an earlier start, if any); does not wait."""
        if self.running:
            raise ServerError(f"{self.label} is already running")
        self.port_file.unlink(missing_ok=True)
        argv = [*self._argv, "--listen", f"127.0.0.1:{self.port}"]
        argv += ["--port-file", str(self.port_file)]
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self._spawned = time.perf_counter()
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=self._env, cwd=self._cwd)
        return self

    def wait_port(self, timeout_s: float | None = None) -> int:
        """Block until the port file appears (the server serves); the bound port.

        Raises :class:`ServerError` if the process exits first or ``timeout_s`` (default:
        the constructor's ``start_timeout_s``) passes; the process is left as it is.
        """
        proc = self._process()
        limit = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        while True:
            # The server writes the file under another name and renames it: if it exists,
            # it is complete.
            with contextlib.suppress(FileNotFoundError):
                self.port = int(self.port_file.read_text().split()[0])
                self.ready_s = time.perf_counter() - self._spawned
                return self.port
            if proc.poll() is not None:
                raise ServerError(f"{self.label} exited with {proc.returncode}{self._tail()}")
            if time.monotonic() > deadline:
                raise ServerError(f"{self.label} did not serve within {limit:g} s{self._tail()}")
            time.sleep(POLL_S)

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM (graceful shutdown; SIGCONT first, in case it is paused), SIGKILL after
        ``grace_s``; the exit status (None if never started)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def wait(self, timeout_s: float) -> int:
        """Wait (bounded) for the process to exit on its own, e.g. after a signal; its exit
        status. Raises ``subprocess.TimeoutExpired`` if it does not."""
        return self._process().wait(timeout_s)

    def signal(self, signum: int) -> None:
        self._process().send_signal(signum)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or closed."""
        proc = self._process()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def restart(self, grace_s: float = 15.0) -> int:
        """Stop, start on the same port, wait until it serves again; the port."""
        self.stop(grace_s)
        return self.start().wait_port()

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def __enter__(self) -> ServerProcess:
        self.start()
        try:
            self.wait_port()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ what it is
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self._process().pid

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` (a gRPC target); valid once :meth:`wait_port` returned."""
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_log(self, pattern: str, timeout_s: float = 30.0) -> re.Match[str]:
        """The first match of ``pattern`` in the log, waiting for it (bounded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            match = re.search(pattern, self.log_text())
            if match is not None:
                return match
            if not self.running or time.monotonic() > deadline:
                raise ServerError(f"{self.label} never logged {pattern!r}{self._tail()}")
            time.sleep(0.02)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)

    def peak_rss_bytes(self) -> int:
        """The process's peak resident set size so far (``VmHWM``)."""
        return rss_bytes(self.pid, "VmHWM")

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def _process(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise ServerError(f"{self.label} was never started")
        return self.proc

    def _tail(self) -> str:
        text = self.log_text()[-TAIL_CHARS:]
        if not text:
            return f" (its log {self.log_path} is empty)"
        return f"; its log ({self.log_path}) ends:\n{text}"


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """Resident set size of process ``pid`` now (``VmRSS``), or its peak so far
    (``field="VmHWM"``), from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise ServerError(f"no {field} in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process ``pid`` used so far, all threads (``/proc``)."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(*servers: ServerProcess) -> Iterator[tuple[ServerProcess, ...]]:
    """Start every server, then wait for each (their start-ups overlap); stop them all on
    exit, whatever happened."""
    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_port()
        yield servers
    finally:
        for server in servers:
            server.stop()


def free_port() -> int:
    """A port that was free a moment ago, for a program that cannot bind port 0 and say
    which port it got (redis-server). It can be taken before the program binds it: prefer
    port 0 and a port file (:class:`ServerProcess`) wherever the program supports it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
