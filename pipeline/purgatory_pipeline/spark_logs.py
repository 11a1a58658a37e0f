"""Spark's and py4j's logs to a file, not the console (the CLI's default).

Spark logs through log4j2 to the console by default: a first run's ``WARN DataSource: All
paths were ignored``, the host name's loopback warning, the stage progress bar, a
streaming query's "The state for version N doesn't exist in loadedMaps"; py4j logs its
connection notices through Python's logging. The CLI sends all of it to one file under
the command's output (:func:`log_path`), printed once, so the console keeps the
pipeline's own lines (one per step) and its errors in one line:

- **log4j2**: a properties file written beside the log and named to the JVM before it
  starts (``spark.driver.extraJavaOptions``), so it applies from Spark's very first line
  (the shell's level, ``org.apache.spark.repl.Main``, is the root's: else Spark, which
  treats PySpark as a shell, prints "Setting default log level"). The progress bar is off.
- **the JVM's own stderr** (its "Using incubator modules" notice, which is not log4j's,
  and the stderr of the Python workers it starts) is the log file too:
  :func:`jvm_stderr_to` points this process's fd 2 there while the JVM is spawned, which
  it inherits, then restores it.
- **py4j and pyspark's Python loggers** write to the same file (:func:`python_logs_to`),
  and not to the console.

Both writers append (``O_APPEND``), so their lines interleave whole. The CLI does all of
this only when it starts the JVM: in a process that already holds a session (a notebook,
the tests) the logs stay where that process sends them.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["PYTHON_LOGGERS", "file_log_conf", "jvm_stderr_to", "log_path", "python_logs_to"]

# Python loggers whose lines are Spark's business, not the user's.
PYTHON_LOGGERS = ("py4j", "pyspark")
LOG_DIR = "_logs"
# A date and level first, as log4j's lines are (see _PROPERTIES).
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = warn
"""


def log_path(command: str, out: str | None) -> Path:
    """``OUT/_logs/spark-COMMAND.log`` where ``out`` is a local path or ``file:`` URI (Spark
    skips ``_`` names when it reads a directory); else a file in the temp directory."""
    if out:
        parsed = urlparse(out)
        if parsed.scheme in ("", "file"):
            local = Path(parsed.path if parsed.scheme == "file" else out)
            return local.resolve() / LOG_DIR / f"spark-{command}.log"
    return Path(tempfile.gettempdir()) / "purgatory-pipeline" / f"spark-{command}-{os.getpid()}.log"


def file_log_conf(log: str | Path) -> dict[str, str]:
    """Spark settings that send its log to ``log`` (created empty, with its directory) and
    turn its console progress bar off; the log4j2 file is ``log`` + ``.log4j2.properties``."""
    path = Path(log).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    properties = path.with_name(path.name + ".log4j2.properties")
    properties.write_text(_PROPERTIES.format(log=path))
    return {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={properties.as_uri()}",
        "spark.ui.showConsoleProgress": "false",
    }


@contextmanager
def jvm_stderr_to(log: str | Path) -> Iterator[None]:
    """Within the block, this process's stderr (fd 2) appends to ``log``: a JVM (and so its
    Python workers) started in it keeps that file as its stderr; fd 2 is restored after."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def python_logs_to(log: str | Path, level: int = logging.INFO) -> None:
    """py4j's and pyspark's loggers write to ``log`` (appending) instead of the console, for
    the rest of the process (a command that started its JVM: py4j logs as it exits)."""
    handler = logging.FileHandler(log, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    for name in PYTHON_LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
