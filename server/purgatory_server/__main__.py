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

from purgatory_server._service.app import serve
from purgatory_server._service.config import ConfigError, load_config

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
    if args.max_concurrent_rpcs is not None:
        overrides["max_concurrent_rpcs"] = args.max_concurrent_rpcs
    if args.purgatory:
        overrides["purgatories"] = list(args.purgatory)
    try:
        config = load_config(args.config, overrides=overrides)
    except ConfigError as exc:
        sys.stderr.write(f"purgatory-server: {exc}\n")
        return 2
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(config))
    except OSError as exc:
        logger.error("cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
