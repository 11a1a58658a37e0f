"""Ctrl-C (SIGINT) for the CLI's commands: one line, then a clean stop.

PySpark's own SIGINT handler cancels all jobs through the main thread's py4j connection,
which is the one waiting for the interrupted call, then raises ``KeyboardInterrupt`` inside
py4j: the console then got about 40 lines of py4j tracebacks. :class:`Interrupt` replaces it
while a command runs (installed after the session starts: PySpark installs its own
then): the first SIGINT logs one line and calls ``on_interrupt`` (a
``watch`` sets its stop flag and stops its query between batches; ``ingest`` and
``report`` cancel Spark's jobs and stop the session they started from another thread,
with its own connection, so the command's call fails, no later step runs, and it
unwinds); a second SIGINT raises ``KeyboardInterrupt`` at once.
The CLI exits with status 130 (128 + SIGINT) after an interrupt, whatever the unwinding
raised. The JVM ignores SIGINT (PySpark starts it so), so a terminal's Ctrl-C, which goes
to the whole process group, reaches only this process's handler for Spark's part.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["EXIT_STATUS", "Interrupt", "stop_spark_in_background"]

log = logging.getLogger(__name__)

EXIT_STATUS = 128 + signal.SIGINT


class Interrupt:
    """The command's Ctrl-C: :meth:`handling` installs the handler for a block (main thread
    only; elsewhere it does nothing); :attr:`happened` says whether one came."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.happened = threading.Event()

    @contextmanager
    def handling(self, on_interrupt: Callable[[], None]) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handle(signum: int, frame: FrameType | None) -> None:
            if self.happened.is_set():
                raise KeyboardInterrupt
            self.happened.set()
            log.info("%s", self.message)
            on_interrupt()

        previous = signal.signal(signal.SIGINT, handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def stop_spark_in_background(spark: Any, *, session: bool) -> Callable[[], None]:
    """An ``on_interrupt`` for a command that is one long run of Spark calls: from a new
    thread (its own py4j connection; the main thread's is busy with the interrupted call)
    cancel every job and, when ``session`` (the command started the session), stop it, so
    that no later step starts one either. A session the caller holds is left up."""

    def stop() -> None:
        spark.sparkContext.cancelAllJobs()
        if session:
            spark.stop()

    def start() -> None:
        threading.Thread(target=stop, name="purgatory-interrupt", daemon=True).start()

    return start
