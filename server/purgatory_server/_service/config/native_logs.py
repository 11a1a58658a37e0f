"""gRPC core's own log lines, and anything else written to file descriptor 2, as records.

gRPC's C core writes straight to descriptor 2, which under ``--log-format json`` would
break "one JSON object per line". :class:`NativeStderr` puts a pipe in place of
descriptor 2 and a thread turns each line into a record of the ``grpc`` logger (the
core's letter becomes the level), or of ``stderr`` for any other line. The log handler
writes to a duplicate of the real descriptor 2 (:attr:`stream`), never to the pipe, so a
record cannot loop back.

Thread safety: :meth:`start` and :meth:`stop` belong to the main thread (they swap a
process-wide descriptor); the reader thread only emits records (logging locks its
handlers). Children spawned meanwhile inherit the pipe as their stderr: their lines are
captured too, and :meth:`stop` waits for them only a moment.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import TextIO

__all__ = ["NativeStderr", "parse_line"]

# I1127 10:40:14.562000   12201 ssl_transport_security.cc:2563] Handshake failed ...
_CORE_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+\s+([^\s\]]+)\] ?(.*)$")
_LEVELS = {"I": logging.INFO, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}


def parse_line(line: str) -> tuple[str, int, str]:
    """(logger name, level, message) of one line written to descriptor 2."""
    core = _CORE_LINE.match(line)
    if core is None:
        return "stderr", logging.WARNING, line
    letter, where, message = core.groups()
    return "grpc", _LEVELS[letter], f"{message} ({where})"


class NativeStderr:
    """Descriptor 2 read into log records while started (see the module docstring)."""

    def __init__(self) -> None:
        self._saved = -1
        self._thread: threading.Thread | None = None
        self.stream: TextIO | None = None

    def start(self) -> TextIO:
        """Swap descriptor 2 for the pipe; the stream (the real stderr) to log to."""
        self._saved = os.dup(2)
        self.stream = open(  # noqa: SIM115 - closed by stop()
            os.dup(self._saved), "w", buffering=1, encoding="utf-8", errors="backslashreplace"
        )
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(
            target=self._pump, args=(read_end,), name="native-stderr", daemon=True
        )
        self._thread.start()
        return self.stream

    def stop(self, timeout_s: float = 2.0) -> None:
        """Put the real descriptor 2 back, then let the reader drain what is left."""
        if self._saved < 0:
            return
        os.dup2(self._saved, 2)  # closes our write end: the reader sees end-of-file
        os.close(self._saved)
        self._saved = -1
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    @staticmethod
    def _pump(read_end: int) -> None:
        with open(read_end, "rb") as lines:
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if text:
                    name, level, message = parse_line(text)
                    logging.getLogger(name).log(level, "%s", message)
