"""``python -m purgatory_server`` / ``purgatory-server``: run the gRPC purgatory server.

Configuration precedence: defaults < ``--config`` TOML < ``PURGATORY_*`` environment
variables < flags (see docs/configuration.md). Stops gracefully on SIGTERM/SIGINT.

Every failure to start is one line on stderr and a non-zero exit: 2 for a bad flag,
option or configuration file (nothing was tried), 1 when the server could not start (a
busy port, an unwritable data directory, a corrupt journal).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from purgatory_server import version
from purgatory_server._journal import JournalCorruptionError, JournalError, JournalGapError
from purgatory_server._service.api.app import serve
from purgatory_server._service.api.listen import parse_listen
from purgatory_server._service.config.logs import configure_logging
from purgatory_server._service.config.native_logs import NativeStderr
from purgatory_server._service.config.server_config import ConfigError, ServerConfig, load_config
from purgatory_server._service.model.errors import ServiceError
from purgatory_server._service.telemetry import TraceLogFilter
from purgatory_server._service.workers.plan import (
    WorkerPlan,
    worker_config,
    worker_count,
    worker_plan,
)
from purgatory_server._service.workers.supervisor import Supervisor

__all__ = ["main"]

logger = logging.getLogger("purgatory_server")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (not the usage block plus the error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="purgatory-server",
        description="Kafka's delayed-operation purgatory over gRPC.",
        epilog="example: purgatory-server --listen 0.0.0.0:50051 --data-dir /var/lib/purgatory "
        "--durable --log-format json (docs/configuration.md lists every option)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--listen", help="host:port to listen on (default 127.0.0.1:50051)")
    parser.add_argument("--config", help="TOML configuration file")
    parser.add_argument("--grace", type=float, help="seconds in-flight calls get on shutdown")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        help="text (default) or json: one JSON object per line (time, level, logger, message)",
    )
    parser.add_argument(
        "--purgatory",
        action="append",
        metavar="NAME",
        help="create this purgatory at start-up (repeatable; replaces the configured list)",
    )
    parser.add_argument(
        "--workers",
        metavar="N|auto",
        help="worker processes behind the one address (default 1; auto or 0: one per usable "
        "core; at most 4 per usable core)",
    )
    # Set by the supervisor for the workers it starts (workers/supervisor.py).
    parser.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-ports", help=argparse.SUPPRESS)
    parser.add_argument("--worker-error-file", help=argparse.SUPPRESS)
    parser.add_argument("--worker-definitions", help=argparse.SUPPRESS)
    parser.add_argument("--max-concurrent-rpcs", type=int, help="gRPC concurrent-call limit")
    parser.add_argument(
        "--data-dir", help="directory of durable purgatories' journals (default ./data)"
    )
    parser.add_argument(
        "--fsync", choices=("always", "interval", "never"), help="journal fsync policy"
    )
    parser.add_argument("--fsync-interval-ms", type=int, help="fsync bound under 'interval'")
    parser.add_argument(
        "--durable",
        action="store_true",
        help="make the purgatories named by --purgatory (and defaults) durable",
    )
    parser.add_argument(
        "--repair-journal",
        action="store_true",
        help="truncate a journal at a corrupt record instead of refusing to start",
    )
    parser.add_argument("--port-file", help="write the bound port to this file once serving")
    parser.add_argument("--tls-cert", help="PEM certificate chain: serve TLS")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--tls-client-ca", help="PEM CA bundle: require client certificates it signed (mTLS)"
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (off by default; HTTPS "
        "with the same certificate under --tls-cert)",
    )
    parser.add_argument(
        "--console-listen",
        metavar="HOST:PORT",
        help="serve the operator's console at http://HOST:PORT/ (off by default; HTTPS "
        "with the same certificate under --tls-cert; docs/console.md)",
    )
    parser.add_argument(
        "--otlp-endpoint", metavar="URL", help="export metrics and spans over OTLP/gRPC"
    )
    parser.add_argument(
        "--tracing", action="store_true", help="a span per RPC, carried by its outcomes"
    )
    return parser.parse_args(argv)


# Flags copied to the configuration under the same name when given.
_PLAIN_FLAGS = (
    "listen",
    "log_level",
    "log_format",
    "max_concurrent_rpcs",
    "data_dir",
    "fsync",
    "fsync_interval_ms",
    "port_file",
    "tls_cert",
    "tls_key",
    "tls_client_ca",
    "metrics_listen",
    "console_listen",
    "otlp_endpoint",
)


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration options the flags set (the highest precedence)."""
    overrides: dict[str, Any] = {
        flag: getattr(args, flag) for flag in _PLAIN_FLAGS if getattr(args, flag) is not None
    }
    if args.workers is not None:
        overrides["workers"] = 0 if args.workers == "auto" else args.workers
    if args.grace is not None:
        overrides["grace_s"] = args.grace
    if args.repair_journal:
        overrides["repair_journal"] = True
    if args.tracing:
        overrides["tracing"] = True
    if args.durable:
        overrides["defaults"] = {"durable": True}
    if args.purgatory:
        overrides["purgatories"] = list(args.purgatory)
    return overrides


def _hint(exc: BaseException) -> str:
    """What to do about a start-up failure, where the message alone does not say."""
    if isinstance(exc, JournalGapError):
        return " (--repair-journal opens it without them and logs the loss)"
    if isinstance(exc, JournalCorruptionError):
        return " (--repair-journal truncates it there)"
    if isinstance(exc, JournalError) and "in use by another" in str(exc):
        return (
            " (another purgatory-server uses this data directory: stop it, or give this "
            "one its own --data-dir)"
        )
    return ""


def _cannot_start(reason: str, status: int, error_file: str | None) -> int:
    """Log why the server could not start (one line); a worker also writes the reason to
    the file its supervisor named, which quotes it as its own last line."""
    logger.error("cannot start: %s", reason)
    if error_file is not None:
        with contextlib.suppress(OSError):  # the supervisor then says only the exit status
            Path(error_file).write_text(f"{reason}\n")
    return status


def run(
    config: ServerConfig, worker: WorkerPlan | None = None, error_file: str | None = None
) -> int:
    """Serve until stopped; the exit status (start-up failures logged as one line)."""
    try:
        asyncio.run(serve(config, worker))
    except ConfigError as exc:
        return _cannot_start(str(exc), 2, error_file)
    except (OSError, JournalError) as exc:
        return _cannot_start(f"{exc}{_hint(exc)}", 1, error_file)
    except ServiceError as exc:  # e.g. a configured purgatory the data directory refuses
        return _cannot_start(exc.message, 1, error_file)
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config, overrides=overrides_from(args))
        parse_listen(config.listen)
        worker_count(config)  # refuses what workers cannot serve yet
    except ConfigError as exc:
        sys.stderr.write(f"purgatory-server: {exc}\n")
        return 2
    # Under JSON, gRPC core's own lines (written straight to descriptor 2) become records.
    native = NativeStderr() if config.log_format == "json" else None
    stream = native.start() if native is not None else None
    # Log lines carry the call's trace and span ids when tracing is on.
    traced = config.tracing or bool(config.otlp_endpoint)
    configure_logging(
        config.log_level, config.log_format, TraceLogFilter() if traced else None, stream=stream
    )
    try:
        if args.worker_index is not None:
            plan = worker_plan(
                config, args.worker_index, args.worker_ports, args.worker_definitions
            )
            return run(worker_config(config, plan.count), plan, args.worker_error_file)
        count = worker_count(config)
        if count > 1:
            argv = list(sys.argv[1:] if argv is None else argv)
            return Supervisor(argv, config, count).run()
        return run(config)
    finally:
        if native is not None:
            native.stop()


if __name__ == "__main__":
    raise SystemExit(main())
