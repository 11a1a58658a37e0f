"""Spark's own log to a file instead of the console (``purgatory-pipeline --spark-log``).

Spark logs through log4j2 to the console by default: a first run's ``WARN DataSource: All
paths were ignored``, the host name's loopback warning, the stage progress bar. With a
log file, every Spark line from WARN up (the level the CLI sets) goes there and the
console keeps only the pipeline's own lines, one per step, and its errors in one line.
The configuration is a log4j2 properties file written beside the log and named to the
JVM before it starts (``spark.driver.extraJavaOptions``), so it applies from Spark's very
first line; in a process that already runs a JVM (a notebook, the tests) it changes
nothing there. (The shell's level, ``org.apache.spark.repl.Main``, is the root's: else
Spark, which treats PySpark as a shell, prints "Setting default log level" on the
console. The JVM's own "Using incubator modules" line is not log4j's and stays.)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["file_log_conf"]

_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.append = false
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = warn
"""


def file_log_conf(log: str | Path) -> dict[str, str]:
    """Spark settings that send its log to ``log`` (created with its directory) and turn
    its console progress bar off; the log4j2 file is ``log`` + ``.log4j2.properties``."""
    path = Path(log).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    properties = path.with_name(path.name + ".log4j2.properties")
    properties.write_text(_PROPERTIES.format(log=path))
    return {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={properties.as_uri()}",
        "spark.ui.showConsoleProgress": "false",
    }
