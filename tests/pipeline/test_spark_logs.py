"""Where the CLI sends Spark's, the JVM's and py4j's logs, and its Ctrl-C handler (no Spark).

The whole commands are checked in subprocesses by test_empty_and_uris.py and test_live.py;
these are the parts alone, fast.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from purgatory_pipeline import spark_logs
from purgatory_pipeline.interrupt import EXIT_STATUS, Interrupt


def test_the_log_goes_under_a_local_output_else_to_the_temp_directory(tmp_path: Path) -> None:
    assert spark_logs.log_path("ingest", str(tmp_path / "t")) == (
        tmp_path / "t" / "_logs" / "spark-ingest.log"
    )
    assert spark_logs.log_path("report", (tmp_path / "r").as_uri()) == (
        tmp_path / "r" / "_logs" / "spark-report.log"
    )
    elsewhere = spark_logs.log_path("watch", "hdfs://namenode/out")
    assert elsewhere.name == f"spark-watch-{os.getpid()}.log"
    assert "hdfs" not in str(elsewhere)


def test_a_child_started_inside_jvm_stderr_to_writes_its_stderr_there(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    with spark_logs.jvm_stderr_to(log):
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stderr.write('from the child\\n')"]
        )
    child.wait(30)
    assert log.read_text() == "from the child\n"
    # fd 2 is this process's own stderr again.
    assert os.readlink("/proc/self/fd/2") != str(log)


def test_py4j_lines_go_to_the_file_not_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "spark.log"
    loggers = [logging.getLogger(name) for name in spark_logs.PYTHON_LOGGERS]
    saved = [(lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    try:
        spark_logs.python_logs_to(log)
        logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
    finally:
        for lg, (level, propagate, handlers) in zip(loggers, saved, strict=True):
            for handler in lg.handlers:
                if handler not in handlers:
                    lg.removeHandler(handler)
                    handler.close()
            lg.setLevel(level)
            lg.propagate = propagate
    assert "INFO py4j.clientserver: Closing down clientserver connection" in log.read_text()
    captured = capsys.readouterr()
    assert "Closing down" not in captured.err + captured.out


def test_the_first_sigint_calls_back_and_a_second_one_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = signal.getsignal(signal.SIGINT)
    interrupt = Interrupt("ingest: interrupted (Ctrl-C): stopping")
    called = []
    with (
        caplog.at_level(logging.INFO, logger="purgatory_pipeline"),
        interrupt.handling(lambda: called.append(1)),
    ):
        signal.raise_signal(signal.SIGINT)
        assert called == [1] and interrupt.happened.is_set()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # restored after the block
    assert [r.getMessage() for r in caplog.records] == [interrupt.message]  # one line
    assert EXIT_STATUS == 130
