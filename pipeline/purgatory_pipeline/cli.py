"""``purgatory-pipeline``: ingest journals, report on the tables, watch a live server.

Every command runs on ``local[*]`` unless ``--master`` says otherwise; under
``spark-submit`` (``spark-submit --master spark://HOST:7077 ... -m``-style entry point
``purgatory_pipeline/__main__.py``) the master comes from spark-submit. Errors the user can
fix (a path without a journal, a corrupt segment, an unreachable server) print one line and
exit with status 2.

Quiet by default: Spark's and py4j's logs go to ``OUT/_logs/spark-COMMAND.log``
(:mod:`purgatory_pipeline.spark_logs`; ``--spark-log FILE`` names another file,
``--spark-log console`` keeps them on the console), whose path is the first line; the
console then has the pipeline's own lines, one per step (``HH:MM:SS ingest: ...``), and
the command's result on stdout. Ctrl-C prints one line and exits with status 130
(:mod:`purgatory_pipeline.interrupt`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from purgatory_pipeline import errors
from purgatory_pipeline.errors import PipelineError
from purgatory_pipeline.interrupt import EXIT_STATUS, Interrupt, stop_spark_in_background

__all__ = ["main"]

log = logging.getLogger("purgatory_pipeline")

# Our errors as Spark shows them when a worker (or the planner's Python process) raised
# them: "purgatory_pipeline.errors.NAME: message" somewhere in the wrapped text.
_MARKERS = tuple(name for name in errors.__all__ if name != "PipelineError")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="purgatory-pipeline", description="Spark analytics for Purgatory."
    )
    parser.add_argument("--master", help="Spark master (default local[*], or spark-submit's)")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting"
    )
    parser.add_argument("--log-level", default="INFO", help="the pipeline's log level")
    parser.add_argument(
        "--spark-log",
        metavar="FILE",
        help="where Spark's and py4j's logs go (default OUT/_logs/spark-COMMAND.log; "
        "'console': Spark's console, with its progress bar)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", help="journal files -> Parquet tables")
    ingest.add_argument(
        "--journal",
        nargs="+",
        required=True,
        metavar="PATH",
        help="journal directory, segment file or data directory (local path or URI)",
    )
    ingest.add_argument("--out", required=True, help="directory of the tables")
    ingest.add_argument(
        "--full",
        action="store_true",
        help="decode every segment again (default: only those not ingested into --out yet)",
    )
    ingest.add_argument(
        "--follow",
        action="store_true",
        help="keep the tables up to date as the journals grow (a streaming query)",
    )
    ingest.add_argument("--checkpoint", help="Spark checkpoint directory (with --follow)")
    ingest.add_argument(
        "--catalog",
        metavar="DATABASE",
        help="register the tables in Spark's catalog as DATABASE.operations, ... "
        "(a local metastore under --out unless --conf spark.sql.catalogImplementation says)",
    )
    ingest.add_argument(
        "--interval", type=float, default=10.0, help="seconds between updates (with --follow)"
    )
    ingest.add_argument("--for-seconds", type=float, help="stop following after this long")

    report = sub.add_parser("report", help="tables -> Parquet/JSON summaries and HTML report")
    report.add_argument("--tables", required=True, help="what ingest wrote")
    report.add_argument("--out", required=True, help="directory for the report")

    watch = sub.add_parser("watch", help="live per-minute aggregates from a running server")
    watch.add_argument("--target", required=True, help="HOST:PORT of the purgatory server")
    watch.add_argument("--purgatory", default="default")
    watch.add_argument("--out", help="Parquet directory (default: print to the console)")
    watch.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    watch.add_argument("--interval", type=float, default=10.0, help="seconds between updates")
    watch.add_argument("--for-seconds", type=float, help="stop after this long")
    watch.add_argument("--on-reset", choices=("fail", "restart"), default="fail")
    watch.add_argument(
        "--watermark",
        default="10 minutes",
        help="how late an outcome may complete and still count (bounds the state)",
    )
    watch.add_argument("--starting", choices=("earliest", "latest"), default="earliest")
    args = parser.parse_args(argv)
    if args.command == "ingest" and args.follow and not args.checkpoint:
        parser.error("ingest --follow needs --checkpoint DIR (Spark's checkpoint)")
    return args


def _conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise PipelineError(f"--conf wants KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _output(args: argparse.Namespace) -> str | None:
    """The directory the command writes (where its Spark log goes by default)."""
    out: str | None = args.out
    return out or getattr(args, "checkpoint", None)


def run(args: argparse.Namespace, interrupt: Interrupt | None = None) -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415 - pyspark only where it runs

    from purgatory_pipeline import spark_logs  # noqa: PLC0415
    from purgatory_pipeline.session import (  # noqa: PLC0415 - starts a JVM
        get_spark,
        quiet_task_failures,
    )

    # Who starts the session stops it. Left to the JVM's exit hook, the event log was
    # finished only after the command had returned (seen then: one run's log without the
    # application's end, another's still marked in progress). A session the caller
    # already holds (tests, a notebook) stays up, and its logs stay where they go.
    started = SparkSession.getActiveSession() is None
    conf = _conf(args.conf)
    if args.command == "ingest" and args.catalog:
        from purgatory_pipeline.catalog import metastore_conf  # noqa: PLC0415

        conf = {**metastore_conf(args.out), **conf}
    log_file: Path | None = None
    if started and args.spark_log != "console":
        log_file = Path(args.spark_log or spark_logs.log_path(args.command, _output(args)))
        conf = {**spark_logs.file_log_conf(log_file), **conf}  # --conf still wins
        log.info("%s: Spark's log: %s", args.command, log_file)
        # Left in place to the end: py4j still logs as the process exits.
        spark_logs.python_logs_to(log_file)
        with spark_logs.jvm_stderr_to(log_file):
            spark = get_spark(args.master, **conf)
    else:
        if args.log_level.upper() != "DEBUG":  # py4j's connection notices are not ours
            logging.getLogger("py4j").setLevel(logging.WARNING)
        spark = get_spark(args.master, **conf)
    try:
        spark.sparkContext.setLogLevel("WARN")
        if args.log_level.upper() != "DEBUG":
            quiet_task_failures(spark)
        return _command(spark, args, interrupt or Interrupt(""), started=started)
    finally:
        if started:
            spark.stop()


def _command(spark: Any, args: argparse.Namespace, interrupt: Interrupt, *, started: bool) -> Any:
    stop_spark = stop_spark_in_background(spark, session=started)
    if args.command == "ingest" and args.follow:
        stop = threading.Event()
        with interrupt.handling(stop.set):
            _follow(spark, args, stop)
        return None
    if args.command == "ingest":
        from purgatory_pipeline.ingest import ingest  # noqa: PLC0415

        with interrupt.handling(stop_spark):
            summary = ingest(spark, args.journal, args.out, full=args.full)
            if args.catalog:
                from purgatory_pipeline.catalog import register_tables  # noqa: PLC0415

                names = register_tables(spark, args.out, args.catalog)
                log.info("ingest: registered %s", ", ".join(names))
        log.info(
            "ingest: done: %s records from %d new segments; rows: %s",
            f"{sum(summary.records.values()):,}",
            summary.segments_decoded,
            ", ".join(f"{name} {count:,}" for name, count in summary.rows.items()),
        )
        print(json.dumps(summary.__dict__, indent=2))  # noqa: T201 - the command's output
        return summary
    if args.command == "report":
        from purgatory_pipeline.outputs import location  # noqa: PLC0415
        from purgatory_pipeline.report import report  # noqa: PLC0415

        with interrupt.handling(stop_spark):
            report(spark, args.tables, args.out)
        print(f"report written to {location(spark, args.out, 'report.html')}")  # noqa: T201
        return None
    from purgatory_pipeline.watch import watch  # noqa: PLC0415

    stop = threading.Event()
    with interrupt.handling(stop.set):
        watch(
            spark,
            args.target,
            args.purgatory,
            out=args.out,
            checkpoint=args.checkpoint,
            interval_s=args.interval,
            for_seconds=args.for_seconds,
            options={"on_reset": args.on_reset, "starting": args.starting},
            watermark=args.watermark,
            stop=stop,
        )
    return None


def _follow(spark: Any, args: argparse.Namespace, stop: threading.Event) -> None:
    """``ingest --follow``: until Ctrl-C (``stop``) or ``--for-seconds``."""
    from purgatory_pipeline.follow import follow  # noqa: PLC0415

    query = follow(spark, args.journal, args.out, args.checkpoint, interval_s=args.interval)
    deadline = None if args.for_seconds is None else time.monotonic() + args.for_seconds
    try:
        while query.isActive and not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            query.awaitTermination(1)
    finally:
        query.stop()


class _ConsoleFormat(logging.Formatter):
    """``HH:MM:SS.mmm message`` for progress, ``HH:MM:SS.mmm error: message`` above INFO."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno > logging.INFO:
            return f"{self._clock(record)} {record.levelname.lower()}: {text}"
        return f"{self._clock(record)} {text}"

    def _clock(self, record: logging.LogRecord) -> str:
        return f"{self.formatTime(record, '%H:%M:%S')}.{int(record.msecs):03d}"


def _console(level: str) -> logging.Handler:
    """The pipeline's lines on stderr (its logger only: Spark's and py4j's go to the file)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ConsoleFormat("%(message)s"))
    logger = logging.getLogger("purgatory_pipeline")
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    handler = _console(args.log_level.upper())
    interrupt = Interrupt(f"{args.command}: interrupted (Ctrl-C): stopping")

    def until_interrupted(record: logging.LogRecord) -> bool:
        # After Ctrl-C its own line is the last: a step that was already under way when
        # it came (its line logged before the stop took hold) stays off the console.
        return not interrupt.happened.is_set() or record.getMessage() == interrupt.message

    handler.addFilter(until_interrupted)
    try:
        return _main(args, interrupt)
    except KeyboardInterrupt:  # before the command's handler was in place, or a second one
        if not interrupt.happened.is_set():
            log.info("%s", interrupt.message)
        return EXIT_STATUS
    finally:
        logging.getLogger("purgatory_pipeline").removeHandler(handler)


def _main(args: argparse.Namespace, interrupt: Interrupt) -> int:
    try:
        run(args, interrupt)
    except PipelineError as exc:
        if interrupt.happened.is_set():
            return EXIT_STATUS
        log.error("%s", exc)
        return 2
    except Exception as exc:
        if interrupt.happened.is_set():  # what cancelling the jobs made the command raise
            return EXIT_STATUS
        # Spark wraps errors raised in workers; show ours as one line when it is one.
        message = str(exc)
        for marker in _MARKERS:
            if marker in message:
                line = next(
                    (ln for ln in message.splitlines() if marker + ":" in ln), message[:300]
                )
                log.error("%s", line.strip())
                return 2
        raise
    return EXIT_STATUS if interrupt.happened.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
