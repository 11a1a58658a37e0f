"""``purgatory``: the purgatory service from a terminal.

    purgatory watch KEY... --timeout-ms 30000 [--condition all|min:N|min-distinct:N|sum:N|values:N]
    purgatory signal KEY [--amount N] [--value N] [--source S] [--data TEXT]
    purgatory get OPERATION_ID
    purgatory force OPERATION_ID
    purgatory subscribe [--after SEQ] [--state completed] [--key K] [--limit N] [--forever]
    purgatory subscribe --group G [--ack] [--visibility-timeout-ms N] [--max-attempts N]
    purgatory ack GROUP SEQ [--attempt N]
    purgatory group list | dead-letters GROUP | redrive GROUP [SEQ...] | delete GROUP
    purgatory group discard GROUP SEQ... | --all
    purgatory purgatories [list | get NAME | create NAME [--durable] | delete NAME]
    purgatory batch signal|watch < lines   (one signal or watch per stdin line)
    purgatory cancel OPERATION_ID... | --key K | --prefix P
    purgatory reschedule OPERATION_ID --timeout-ms N | --due-time-ms MS
    purgatory ls [--key K] [--prefix P] [--state S] [--limit N] [--page-size N]
    purgatory schedule set ID --every-ms N | --cron EXPR [--tz ZONE] | rm ID | ls
    purgatory health
    purgatory completion bash|zsh    (eval "$(purgatory completion bash)")

Results are printed as JSON lines (``--output json``, the default: epoch-ms times, for
scripts) or as a table (``--output table``: ISO 8601 times, for people); bytes (payloads,
signal data) are base64 unless ``--text`` asks for UTF-8. ``subscribe`` streams outcomes
from now on; ``--after 0`` first replays every retained one. The server address
comes from ``--target`` or ``PURGATORY_TARGET`` (default ``127.0.0.1:50051``). Security:
``--token`` (or ``PURGATORY_TOKEN``), ``--tls-ca``/``--tls-cert``/``--tls-key`` (or
``PURGATORY_TLS_CA``/``_CERT``/``_KEY``) and ``--tls`` (system roots). Exit status: 0 on
success, 1 when the server reports an error, 2 for bad usage.

Each subcommand's module registers its parser and handler (``_cli_operations``,
``_cli_subscribe``, ``_cli_groups``, ``_cli_batch``, ``_cli_delayed``, ``_cli_schedule``;
the contract is in ``_cli_common``, the output formats in ``_cli_output``, shell
completion in ``_cli_completion``); this one holds the entry point, the global options and
the commands about the server itself (``purgatories``, ``health``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from purgatory_client import (
    _cli_batch,
    _cli_completion,
    _cli_delayed,
    _cli_groups,
    _cli_operations,
    _cli_schedule,
    _cli_subscribe,
)
from purgatory_client._cli_common import Context, Handler, parse_condition
from purgatory_client._cli_output import OUTPUTS, Printer
from purgatory_client._models import PurgatoryConfig
from purgatory_client._security import Security, resolve_security
from purgatory_client._sync import PurgatoryClient
from purgatory_client.errors import PurgatoryError

__all__ = ["build_parser", "main", "parse_condition"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (not the usage block plus the error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def _target(text: str) -> str:
    """``HOST:PORT`` (or a gRPC URI such as ``unix:/path``, ``dns:///host:port``)."""
    if text.startswith(("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:")):
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:100]!r} is not HOST:PORT (e.g. 127.0.0.1:50051)")
    return text


def build_parser() -> argparse.ArgumentParser:
    """The global options, then each subcommand as its module registers it (with its
    handler); ``purgatories`` and ``health``, about the server itself, are here."""
    parser = _Parser(
        prog="purgatory",
        description="The purgatory service from a terminal: register operations that wait "
        "on keys, signal keys, stream outcomes, administer purgatories.",
        epilog="examples: purgatory watch acks --timeout-ms 30000 --condition min:2; "
        "purgatory signal acks --source broker-1; purgatory subscribe --after 0",
    )
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    _cli_operations.register(sub)
    _cli_subscribe.register(sub)
    _cli_groups.register(sub)
    _register_purgatories(sub)
    _cli_batch.register(sub)
    _cli_delayed.register(sub)
    _cli_schedule.register(sub)
    sub.add_parser("health", help="exit 0 if the server reports SERVING")
    _cli_completion.register(sub)
    return parser


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        type=_target,
        default=os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051"),
        help="server HOST:PORT or gRPC URI (default: $PURGATORY_TARGET or 127.0.0.1:50051; "
        "e.g. --target 10.0.0.5:50051)",
    )
    parser.add_argument("--purgatory", default="default", help="purgatory name (default: default)")
    parser.add_argument("--token", help="bearer token (default: $PURGATORY_TOKEN)")
    parser.add_argument("--tls", action="store_true", help="TLS with the system's trusted CAs")
    parser.add_argument("--tls-ca", help="PEM file of CAs to trust (default: $PURGATORY_TLS_CA)")
    parser.add_argument("--tls-cert", help="PEM client certificate for mutual TLS")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--output",
        choices=OUTPUTS,
        default="json",
        help="json: one JSON object per line, epoch-ms times (the default, for scripts); "
        "table: a header and aligned rows, ISO 8601 UTC times (for people)",
    )
    parser.add_argument(
        "--text",
        action="store_true",
        help="print payloads and signal data as UTF-8 text (default: base64, exact for "
        "binary data; invalid UTF-8 shows as U+FFFD under --text)",
    )


def _register_purgatories(sub: Any) -> None:
    admin = sub.add_parser(
        "purgatories",
        help="list, get, create or delete purgatories",
        epilog="example: purgatory purgatories create orders --durable --max-pending 10000",
    )
    admin.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=["list", "get", "create", "delete"],
        help="default: list",
    )
    admin.add_argument("name", nargs="?", help="the purgatory (get, create, delete)")
    _add_create_options(admin)
    admin.set_defaults(handler=_purgatories)


def _add_create_options(admin: argparse.ArgumentParser) -> None:
    """``purgatories create`` settings; 0 (the default) takes the server's default."""
    admin.add_argument(
        "--durable",
        action="store_true",
        help="create: journal it under the server's --data-dir so pending operations, "
        "signals and outcomes survive a restart (e.g. purgatories create orders --durable)",
    )
    for option, meaning in (
        ("tick-ms", "timing-wheel tick in ms, the expiry resolution (1-60000)"),
        ("wheel-size", "buckets per wheel level (2-4096)"),
        ("max-pending", "pending operations allowed at once"),
        ("retained-events", "outcome events kept for subscribers resuming with --after"),
    ):
        admin.add_argument(
            f"--{option}", type=int, default=0, metavar="N", help=f"create: {meaning}"
        )


# PurgatoryConfig fields without a ``purgatories create`` option, and why.
NO_CREATE_OPTION = {"purge_interval": "kept for compatibility; it has no effect"}


def _create_config(args: argparse.Namespace) -> PurgatoryConfig:
    """Each PurgatoryConfig field from its ``--field-name`` option (see NO_CREATE_OPTION)."""
    names = (f.name for f in dataclasses.fields(PurgatoryConfig))
    chosen = {name: getattr(args, name) for name in names if name in args}
    return PurgatoryConfig(**chosen)


def _security(args: argparse.Namespace) -> Security:
    return resolve_security(
        token=args.token,
        tls=args.tls or None,
        tls_ca=args.tls_ca,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        trust_env=True,
    )


def _purgatories(args: argparse.Namespace, ctx: Context) -> int:
    client, emit = ctx.client, ctx.emit
    if args.action == "list":
        ctx.emit_all(client.list_purgatories())
        return 0
    if args.name is None:
        sys.stderr.write(f"purgatory: purgatories {args.action} needs a NAME\n")
        return 2
    if args.action == "get":
        emit(client.get_purgatory(args.name))
    elif args.action == "create":
        emit(client.create_purgatory(args.name, _create_config(args)))
    else:
        emit({"cancelled": client.delete_purgatory(args.name)})
    return 0


def _version() -> str:
    """The installed ``purgatory-grpc`` distribution's version."""
    try:
        return importlib.metadata.version("purgatory-grpc")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _health(target: str, security: Security, emit: Printer) -> int:
    credentials = security.channel_credentials()
    channel = (
        grpc.secure_channel(target, credentials)
        if credentials is not None
        else grpc.insecure_channel(target)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        except grpc.RpcError as exc:
            hint = _hint(exc.code().name, str(exc.details()), security.tls)
            sys.stderr.write(f"purgatory: unhealthy: {exc.code().name}{hint}\n")
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    emit({"status": status})
    return 0 if resp.status == health_pb2.HealthCheckResponse.SERVING else 1


def _hint(code: str, message: str, tls: bool) -> str:
    """What to try when an error's own words do not say (a plaintext client against a TLS
    server sees only "Socket closed"; a TLS client against a plaintext one a bad record)."""
    if code != "UNAVAILABLE":
        return ""
    if not tls and "Socket closed" in message:
        return " (does the server serve TLS? then pass --tls-ca CA.pem, or --tls for a "
        "certificate the system trusts)"
    if tls and ("WRONG_VERSION_NUMBER" in message or "handshake" in message.lower()):
        return " (TLS handshake failed: is the server plaintext, or is --tls-ca the wrong CA?)"
    return ""


def _not_utf8(argv: Sequence[str]) -> str | None:
    """The first argument that is not valid UTF-8 (every name and key on the wire is)."""
    for position, word in enumerate(argv, 1):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            shown = word.encode("utf-8", "backslashreplace").decode()[:100]
            return f"argument {position} ({shown}) is not valid UTF-8"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    problem = _not_utf8(argv)
    if problem is not None:
        sys.stderr.write(f"purgatory: {problem}\n")
        return 2
    args = build_parser().parse_args(argv)
    emit = Printer(args.output, args.text)
    security: Security | None = None
    try:
        security = _security(args)
        if args.command == "health":
            return _health(args.target, security, emit)
        if args.command == "completion":
            return _cli_completion.print_script(build_parser(), args.shell)
        with PurgatoryClient(
            args.target,
            purgatory=args.purgatory,
            token=security.token,
            tls=security.tls or None,
            tls_ca=args.tls_ca,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        ) as client:
            handler: Handler = args.handler
            return handler(args, Context(client, emit, argv))
    except PurgatoryError as exc:
        hint = _hint(exc.code.name, exc.details, security is not None and security.tls)
        sys.stderr.write(f"purgatory: {exc.code.name}: {exc.details}{hint}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
