"""``python -m purgatory_server`` / ``purgatory-server``: run the gRPC purgatory server.

Configuration precedence: defaults < ``--config`` TOML < ``PURGATORY_*`` environment
variables < flags (see docs/configuration.md). Stops gracefully on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any

from purgatory_server._journal import JournalCorruptionError, JournalError
from purgatory_server._service.app import serve
from purgatory_server._service.config import ConfigError, ServerConfig, load_config
from purgatory_server._service.telemetry import TraceLogFilter

__all__ = ["main"]

logger = logging.getLogger("purgatory_server")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="purgatory-server", description="Kafka's delayed-operation purgatory over gRPC."
    )
    parser.add_argument("--listen", help="host:port to listen on (default 127.0.0.1:50051)")
    parser.add_argument("--config", help="TOML configuration file")
    parser.add_argument("--grace", type=float, help="seconds in-flight calls get on shutdown")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
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


def configure_logging(config: ServerConfig) -> None:
    """Log lines carry the call's trace and span ids when tracing is on."""
    traced = config.tracing or bool(config.otlp_endpoint)
    ids = " trace_id=%(trace_id)s span_id=%(span_id)s" if traced else ""
    logging.basicConfig(
        level=config.log_level.upper(),
        format=f"%(asctime)s %(levelname)s %(name)s{ids}: %(message)s",
    )
    if traced:
        for handler in logging.getLogger().handlers:
            handler.addFilter(TraceLogFilter())


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.listen is not None:
        overrides["listen"] = args.listen
    if args.grace is not None:
        overrides["grace_s"] = args.grace
    if args.log_level is not None:
        overrides["log_level"] = args.log_level
    if args.max_concurrent_rpcs is not None:
        overrides["max_concurrent_rpcs"] = args.max_concurrent_rpcs
    for flag, option in (
        ("data_dir", "data_dir"),
        ("fsync", "fsync"),
        ("fsync_interval_ms", "fsync_interval_ms"),
        ("port_file", "port_file"),
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
    except ConfigError as exc:
        sys.stderr.write(f"purgatory-server: {exc}\n")
        return 2
    configure_logging(config)
    try:
        asyncio.run(serve(config))
    except JournalCorruptionError as exc:
        logger.error("cannot start: %s (--repair-journal truncates it there)", exc)
        return 1
    except (OSError, JournalError, ConfigError) as exc:
        logger.error("cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
