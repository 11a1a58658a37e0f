"""``python -m purgatory_server`` / ``purgatory-server``: run the gRPC purgatory server.

Configuration precedence: defaults < ``--config`` TOML < ``PURGATORY_*`` environment
variables < flags (see docs/configuration.md). Stops gracefully on SIGTERM/SIGINT.

For a person at a terminal every failure to start is one line on stderr and a non-zero
exit: 2 for a bad flag, option or configuration file (nothing was tried), 1 when the
server could not start (a busy port, an unwritable data directory, a corrupt journal).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from purgatory_server._journal import JournalCorruptionError, JournalError
from purgatory_server._service.api.app import serve
from purgatory_server._service.api.listen import parse_listen
from purgatory_server._service.config.logs import configure_logging
from purgatory_server._service.config.server_config import ConfigError, load_config
from purgatory_server._service.core.errors import ServiceError
from purgatory_server._service.telemetry import TraceLogFilter

__all__ = ["main"]

logger = logging.getLogger("purgatory_server")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (not the usage block plus the error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="purgatory-server", description="Kafka's delayed-operation purgatory over gRPC."
    )
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
        help="serve Prometheus metrics at http://HOST:PORT/metrics (off by default)",
    )
    parser.add_argument(
        "--otlp-endpoint", metavar="URL", help="export metrics and spans over OTLP/gRPC"
    )
    parser.add_argument(
        "--tracing", action="store_true", help="a span per RPC, carried by its outcomes"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.listen is not None:
        overrides["listen"] = args.listen
    if args.grace is not None:
        overrides["grace_s"] = args.grace
    if args.log_level is not None:
        overrides["log_level"] = args.log_level
    if args.log_format is not None:
        overrides["log_format"] = args.log_format
    if args.max_concurrent_rpcs is not None:
        overrides["max_concurrent_rpcs"] = args.max_concurrent_rpcs
    for flag, option in (
        ("data_dir", "data_dir"),
        ("fsync", "fsync"),
        ("fsync_interval_ms", "fsync_interval_ms"),
        ("port_file", "port_file"),
        ("tls_cert", "tls_cert"),
        ("tls_key", "tls_key"),
        ("tls_client_ca", "tls_client_ca"),
        ("metrics_listen", "metrics_listen"),
        ("otlp_endpoint", "otlp_endpoint"),
    ):
        if getattr(args, flag) is not None:
            overrides[option] = getattr(args, flag)
    if args.repair_journal:
        overrides["repair_journal"] = True
    if args.tracing:
        overrides["tracing"] = True
    if args.durable:
        overrides["defaults"] = {"durable": True}
    if args.purgatory:
        overrides["purgatories"] = list(args.purgatory)
    try:
        config = load_config(args.config, overrides=overrides)
        parse_listen(config.listen)
    except ConfigError as exc:
        sys.stderr.write(f"purgatory-server: {exc}\n")
        return 2
    # Log lines carry the call's trace and span ids when tracing is on.
    traced = config.tracing or bool(config.otlp_endpoint)
    configure_logging(config.log_level, config.log_format, TraceLogFilter() if traced else None)
    try:
        asyncio.run(serve(config))
    except JournalCorruptionError as exc:
        logger.error("cannot start: %s (--repair-journal truncates it there)", exc)
        return 1
    except ConfigError as exc:
        logger.error("cannot start: %s", exc)
        return 2
    except (OSError, JournalError) as exc:
        logger.error("cannot start: %s", exc)
        return 1
    except ServiceError as exc:  # e.g. a configured purgatory the data directory refuses
        logger.error("cannot start: %s", exc.message)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
