"""``python -m purgatory_pipeline`` as a subprocess whose console a test reads line by line.

A subprocess because the JVM's console is the process's own stderr, which only a separate
run captures; the lines are read by a thread, so a test waits on a line (bounded), never
on a fixed sleep, and can then send SIGINT as Ctrl-C would.
"""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

# The pipeline's own console lines (cli._ConsoleFormat): a time, then the command's name,
# or a level and the command's name.
OUR_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (?:(?:warning|error): )?(?:ingest|report|watch): ")
SPARK_MARKS = (" WARN ", " INFO ", "py4j", "log4j", "WARNING:", "[Stage ", "Traceback")
# Spark settings for a small, quick run (no UI).
QUICK = ("--master", "local[1]", "--conf", "spark.ui.enabled=false")


@dataclass
class CliProcess:
    args: list[str]
    proc: subprocess.Popen[str] = field(init=False)
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _stdout: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "purgatory_pipeline", *QUICK, *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        self._stdout_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._stdout_reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        self._stdout.append(self.proc.stdout.read())

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout_s: float = 240.0) -> str:
        """The first console line (from now) containing ``pattern``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"exited before {pattern!r}: {self.lines}")
            self.lines.append(line)
            if pattern in line:
                return line
        self.proc.kill()
        raise AssertionError(f"no line with {pattern!r} in time: {self.lines}")

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout_s: float = 120.0) -> tuple[int, list[str], str]:
        """Exit status, the console lines after those already read, and stdout."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        rest = []
        while (line := self._queue.get(timeout=10)) is not None:
            rest.append(line)
        self.lines += rest
        self._stdout_reader.join(10)
        return self.proc.returncode, rest, "".join(self._stdout)
