"""``purgatory``: the purgatory service from a terminal.

    purgatory watch KEY... --timeout-ms 30000 [--condition all|min:N|min-distinct:N|sum:N|values:N]
    purgatory signal KEY [--amount N] [--value N] [--source S] [--data TEXT]
    purgatory force OPERATION_ID
    purgatory subscribe [--after SEQ] [--state completed] [--key K] [--limit N]
    purgatory purgatories [list | get NAME | create NAME | delete NAME]
    purgatory batch signal|watch < lines   (one signal or watch per stdin line)
    purgatory health

Results are printed as JSON (one object per line for ``subscribe``). The server address
comes from ``--target`` or ``PURGATORY_TARGET`` (default ``127.0.0.1:50051``). Security:
``--token`` (or ``PURGATORY_TOKEN``), ``--tls-ca``/``--tls-cert``/``--tls-key`` (or
``PURGATORY_TLS_CA``/``_CERT``/``_KEY``) and ``--tls`` (system roots). Exit status: 0 on
success, 1 when the server reports an error, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from purgatory_client._cli_batch import add_batch_parser, run_batch
from purgatory_client._cli_delayed import DELAYED_COMMANDS, add_delayed_parsers, run_delayed
from purgatory_client._models import Condition, OperationState, Signal
from purgatory_client._security import Security, resolve_security
from purgatory_client._sync import PurgatoryClient
from purgatory_client.errors import PurgatoryError

__all__ = ["main", "parse_condition"]


def parse_condition(text: str) -> Condition:
    """``any``, ``all``, ``min:N``, ``min-distinct:N``, ``sum:N`` or ``values:N``."""
    name, _, arg = text.partition(":")
    try:
        if name == "any":
            return Condition.any_key()
        if name == "all":
            return Condition.all_keys()
        if name == "min":
            return Condition.min_signals(int(arg))
        if name == "min-distinct":
            return Condition.min_signals(int(arg), distinct_sources=True)
        if name == "sum":
            return Condition.sum_at_least(int(arg))
        if name == "values":
            return Condition.values_at_least(default_target=int(arg))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"bad condition {text!r}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _emit(value: Any) -> None:
    sys.stdout.write(json.dumps(_jsonable(value), sort_keys=True) + "\n")
    sys.stdout.flush()


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
    parser = _Parser(prog="purgatory", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target", type=_target, default=os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051")
    )
    parser.add_argument("--purgatory", default="default", help="purgatory name")
    parser.add_argument("--token", help="bearer token (default: $PURGATORY_TOKEN)")
    parser.add_argument("--tls", action="store_true", help="TLS with the system's trusted CAs")
    parser.add_argument("--tls-ca", help="PEM file of CAs to trust (default: $PURGATORY_TLS_CA)")
    parser.add_argument("--tls-cert", help="PEM client certificate for mutual TLS")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    sub = parser.add_subparsers(dest="command", required=True)

    watch = sub.add_parser("watch", help="register an operation and wait for its outcome")
    watch.add_argument("keys", nargs="*", metavar="KEY")
    watch.add_argument("--timeout-ms", type=int, required=True)
    watch.add_argument("--condition", type=parse_condition, default=Condition.any_key())
    watch.add_argument("--id", default="", help="operation id (default: server-assigned)")
    watch.add_argument("--payload", default="")
    watch.add_argument("--no-wait", action="store_true", help="return once registered")

    signal = sub.add_parser("signal", help="signal a key")
    signal.add_argument("key")
    signal.add_argument("--amount", type=int, default=0)
    signal.add_argument("--value", type=int)
    signal.add_argument("--source", default="")
    signal.add_argument("--data", default="")

    force = sub.add_parser("force", help="force-complete an operation")
    force.add_argument("operation_id")

    subscribe = sub.add_parser("subscribe", help="stream outcomes as JSON lines")
    subscribe.add_argument("--after", type=int, help="replay retained events after SEQ")
    subscribe.add_argument(
        "--state",
        action="append",
        default=[],
        choices=[s.name.lower() for s in OperationState if s.is_final],
    )
    subscribe.add_argument("--key", action="append", default=[])
    subscribe.add_argument("--prefix", default="", help="operation id prefix")
    subscribe.add_argument("--limit", type=int, help="stop after N events")

    admin = sub.add_parser("purgatories", help="list, get, create or delete purgatories")
    admin.add_argument(
        "action", nargs="?", default="list", choices=["list", "get", "create", "delete"]
    )
    admin.add_argument("name", nargs="?")

    add_batch_parser(sub, parse_condition)
    add_delayed_parsers(sub)
    sub.add_parser("health", help="exit 0 if the server reports SERVING")
    return parser


def _security(args: argparse.Namespace) -> Security:
    return resolve_security(
        token=args.token,
        tls=args.tls or None,
        tls_ca=args.tls_ca,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        trust_env=True,
    )


def _health(target: str, security: Security) -> int:
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
            sys.stderr.write(f"purgatory: unhealthy: {exc.code().name}\n")
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    _emit({"status": status})
    return 0 if resp.status == health_pb2.HealthCheckResponse.SERVING else 1


def _run(args: argparse.Namespace, client: PurgatoryClient) -> int:
    if args.command == "watch":
        _emit(
            client.try_complete_else_watch(
                args.keys,
                args.timeout_ms,
                condition=args.condition,
                payload=args.payload.encode(),
                operation_id=args.id,
                wait=not args.no_wait,
            )
        )
    elif args.command == "signal":
        sig = Signal(args.amount, args.value, args.source, args.data.encode())
        _emit({"completed": client.check_and_complete(args.key, sig)})
    elif args.command == "force":
        _emit(client.force_complete(args.operation_id))
    elif args.command == "batch":
        return run_batch(args, client, _emit)
    elif args.command in DELAYED_COMMANDS:
        return run_delayed(args, client, _emit)
    elif args.command == "subscribe":
        events = client.subscribe(
            after_sequence=args.after,
            states=[OperationState[s.upper()] for s in args.state],
            keys=args.key,
            operation_id_prefix=args.prefix,
        )
        for n, event in enumerate(events, 1):
            _emit(event)
            if args.limit is not None and n >= args.limit:
                break
    elif args.action == "list":
        for info in client.list_purgatories():
            _emit(info)
    elif args.name is None:
        sys.stderr.write(f"purgatory: purgatories {args.action} needs a NAME\n")
        return 2
    elif args.action == "get":
        _emit(client.get_purgatory(args.name))
    elif args.action == "create":
        _emit(client.create_purgatory(args.name))
    else:
        _emit({"cancelled": client.delete_purgatory(args.name)})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        security = _security(args)
        if args.command == "health":
            return _health(args.target, security)
        with PurgatoryClient(
            args.target,
            purgatory=args.purgatory,
            token=security.token,
            tls=security.tls or None,
            tls_ca=args.tls_ca,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        ) as client:
            return _run(args, client)
    except PurgatoryError as exc:
        sys.stderr.write(f"purgatory: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
