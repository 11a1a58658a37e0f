"""``purgatory``: the purgatory service from a terminal.

    purgatory watch KEY... --timeout-ms 30000 [--condition all|min:N|min-distinct:N|sum:N|values:N]
    purgatory signal KEY [--amount N] [--value N] [--source S] [--data TEXT]
    purgatory get OPERATION_ID
    purgatory force OPERATION_ID
    purgatory subscribe [--after SEQ] [--state completed] [--key K] [--limit N] [--forever]
    purgatory subscribe --group G [--ack] [--visibility-timeout-ms N] [--max-attempts N]
    purgatory ack GROUP SEQ [--attempt N]
    purgatory group list | dead-letters GROUP | redrive GROUP [SEQ...] | delete GROUP
    purgatory purgatories [list | get NAME | create NAME [--durable] | delete NAME]
    purgatory batch signal|watch < lines   (one signal or watch per stdin line)
    purgatory health

Results are printed as JSON (one object per line for ``subscribe``); bytes (payloads,
signal data) are base64 unless ``--text`` asks for UTF-8. ``subscribe`` streams outcomes
from now on; ``--after 0`` first replays every retained one. The server address
comes from ``--target`` or ``PURGATORY_TARGET`` (default ``127.0.0.1:50051``). Security:
``--token`` (or ``PURGATORY_TOKEN``), ``--tls-ca``/``--tls-cert``/``--tls-key`` (or
``PURGATORY_TLS_CA``/``_CERT``/``_KEY``) and ``--tls`` (system roots). Exit status: 0 on
success, 1 when the server reports an error, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import enum
import functools
import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from purgatory_client._base import ResumePolicy
from purgatory_client._cli_batch import add_batch_parser, run_batch
from purgatory_client._cli_delayed import DELAYED_COMMANDS, add_delayed_parsers, run_delayed
from purgatory_client._cli_groups import (
    GROUP_COMMANDS,
    add_group_parsers,
    add_group_subscribe_args,
    run_group,
    run_group_subscribe,
)
from purgatory_client._cli_schedule import add_schedule_parser, run_schedule
from purgatory_client._models import Condition, OperationState, PurgatoryConfig, Signal
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


def _jsonable(value: Any, text: bool = False) -> Any:
    """JSON-ready ``value``; bytes are base64 (exact for any bytes), or with ``text`` UTF-8
    where invalid sequences become U+FFFD (readable, but lossy for binary data)."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") if text else base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name), text) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, text) for v in value]
    return value


def _emit(value: Any, text: bool = False) -> None:
    sys.stdout.write(json.dumps(_jsonable(value, text), sort_keys=True) + "\n")
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


CONDITION_HELP = (
    "when the operation completes: any (the first signal on any key, the default), all "
    "(every key signalled), min:N (N signals), min-distinct:N (N distinct --source values), "
    "sum:N (signals' --amount adds up to N), values:N (every key's latest --value >= N); "
    "e.g. --condition min-distinct:2"
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="purgatory",
        description=__doc__.splitlines()[0],
        epilog="examples: purgatory watch acks --timeout-ms 30000 --condition min:2; "
        "purgatory signal acks --source broker-1; purgatory subscribe --after 0",
    )
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
    parser.add_argument(
        "--text",
        action="store_true",
        help="print payloads and signal data as UTF-8 text (default: base64, exact for "
        "binary data; invalid UTF-8 shows as U+FFFD under --text)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    watch = sub.add_parser(
        "watch",
        help="register an operation and wait for its outcome",
        epilog="example: purgatory watch acks --timeout-ms 30000 --condition min-distinct:2 "
        "--id produce-17 (Ctrl-C stops waiting, not the operation)",
    )
    watch.add_argument("keys", nargs="*", metavar="KEY", help="keys to watch (none: a pure timer)")
    watch.add_argument(
        "--timeout-ms",
        type=int,
        required=True,
        help="expire the operation after this many ms (e.g. 30000)",
    )
    watch.add_argument(
        "--condition", type=parse_condition, default=Condition.any_key(), help=CONDITION_HELP
    )
    watch.add_argument("--id", default="", help="operation id (default: server-assigned)")
    watch.add_argument(
        "--payload", default="", help="UTF-8 text echoed in the outcome (e.g. order-17)"
    )
    watch.add_argument("--no-wait", action="store_true", help="return once registered")
    watch.add_argument(
        "--extend-on-resend",
        action="store_true",
        help="debounce: re-sending this --id while pending pushes its deadline to now + "
        "--timeout-ms (e.g. watch --id flush-1 --timeout-ms 5000 --extend-on-resend)",
    )
    watch.add_argument(
        "--max-extend-ms",
        type=int,
        default=0,
        metavar="MS",
        help="with --extend-on-resend: never past creation + MS (0: no cap)",
    )

    signal = sub.add_parser(
        "signal",
        help="signal a key",
        epilog="example: purgatory signal acks --source broker-1 --amount 1",
    )
    signal.add_argument("key", help="the key whose watchers are checked")
    signal.add_argument("--amount", type=int, default=0, help="added to sum:N conditions (e.g. 3)")
    signal.add_argument("--value", type=int, help="the key's latest value, for values:N (e.g. 42)")
    signal.add_argument("--source", default="", help="who signals, counted once by min-distinct:N")
    signal.add_argument("--data", default="", help="UTF-8 text appended to the outcome's data")

    get = sub.add_parser(
        "get",
        help="print one operation's state (and, while WATCHING, its progress so far)",
        epilog="example: purgatory get order-17",
    )
    get.add_argument("operation_id", metavar="OPERATION_ID", help="the operation's id")

    force = sub.add_parser(
        "force", help="force-complete an operation", epilog="example: purgatory force order-17"
    )
    force.add_argument("operation_id", metavar="OPERATION_ID", help="the operation's id")

    subscribe = sub.add_parser(
        "subscribe",
        help="stream outcomes as JSON lines (from now on; --after 0 replays retained ones)",
        description="Stream outcomes as JSON lines. Without --after it prints only outcomes "
        "that happen from now on (nothing until an operation ends); --after 0 first replays "
        "every outcome the server still retains, --after SEQ those after SEQ. A dropped "
        "stream resumes where it stopped (see --resume-attempts, --forever).",
        epilog="example: purgatory subscribe --after 0 --state expired --limit 10",
    )
    subscribe.add_argument(
        "--after",
        type=int,
        metavar="SEQ",
        help="replay retained events after SEQ first (0: all retained)",
    )
    subscribe.add_argument(
        "--state",
        action="append",
        default=[],
        choices=[s.name.lower() for s in OperationState if s.is_final],
        help="only outcomes in this state (repeatable)",
    )
    subscribe.add_argument(
        "--key", action="append", default=[], help="only operations watching KEY (repeatable)"
    )
    subscribe.add_argument("--prefix", default="", help="operation id prefix")
    subscribe.add_argument("--limit", type=int, help="stop after N events")
    subscribe.add_argument(
        "--resume-attempts",
        type=int,
        default=8,
        metavar="N",
        help="resumes in a row without an event before giving up (default 8: about 8 s)",
    )
    subscribe.add_argument(
        "--resume-max-delay",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="cap of the doubling delay between resumes (default 2.0)",
    )
    subscribe.add_argument(
        "--forever", action="store_true", help="resume however long the server is away"
    )
    add_group_subscribe_args(subscribe)
    add_group_parsers(sub)

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

    add_batch_parser(sub, parse_condition)
    add_delayed_parsers(sub)
    add_schedule_parser(sub, parse_condition)
    sub.add_parser("health", help="exit 0 if the server reports SERVING")
    return parser


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


def _watch(
    args: argparse.Namespace,
    client: PurgatoryClient,
    emit: Callable[[Any], None],
    argv: Sequence[str],
) -> None:
    """Register, then wait; Ctrl-C while waiting says how to wait on it again.

    Without ``--id`` a waiting watch registers first (no wait) to learn the server's id,
    then re-sends the same operation with that id and waits: a re-send of an identical
    operation is idempotent, so this is one operation either way.
    """

    def register(operation_id: str, wait: bool) -> Any:
        return client.try_complete_else_watch(
            args.keys,
            args.timeout_ms,
            condition=args.condition,
            payload=args.payload.encode(),
            operation_id=operation_id,
            wait=wait,
            extend_on_resend=args.extend_on_resend,
            max_extend_ms=args.max_extend_ms,
        )

    if args.no_wait:
        emit(register(args.id, False))
        return
    operation_id = args.id
    created: bool | None = None
    if not operation_id:
        status = register("", False)
        if status.state.is_final:
            emit(status)
            return
        operation_id = status.operation_id
        created = status.created  # the wait below is a re-send: it reports created=False
    try:
        result = register(operation_id, True)
        emit(result if created is None else dataclasses.replace(result, created=created))
    except KeyboardInterrupt:
        again = list(argv) if args.id else [*argv, "--id", operation_id]
        sys.stderr.write(
            f"purgatory: stopped waiting; operation {operation_id!r} is still pending on "
            f"the server. Wait on it again with:\n  purgatory {shlex.join(again)}\n"
            f"or see its state with: purgatory get {shlex.quote(operation_id)}\n"
        )
        raise


def _run(
    args: argparse.Namespace,
    client: PurgatoryClient,
    emit: Callable[[Any], None] = _emit,
    argv: Sequence[str] = (),
) -> int:
    if args.command == "watch":
        _watch(args, client, emit, argv)
    elif args.command == "signal":
        sig = Signal(args.amount, args.value, args.source, args.data.encode())
        emit({"completed": client.check_and_complete(args.key, sig)})
    elif args.command == "get":
        emit(client.get_operation(args.operation_id))
    elif args.command == "force":
        emit(client.force_complete(args.operation_id))
    elif args.command == "batch":
        return run_batch(args, client, emit)
    elif args.command in DELAYED_COMMANDS:
        return run_delayed(args, client, emit)
    elif args.command == "schedule":
        return run_schedule(args, client, emit)
    elif args.command in GROUP_COMMANDS:
        return run_group(args, client, emit)
    elif args.command == "subscribe" and args.group:
        return run_group_subscribe(args, client, emit)
    elif args.command == "subscribe":
        events = client.subscribe(
            after_sequence=args.after,
            states=[OperationState[s.upper()] for s in args.state],
            keys=args.key,
            operation_id_prefix=args.prefix,
            resume=ResumePolicy(
                attempts=None if args.forever else args.resume_attempts,
                max_delay_s=args.resume_max_delay,
            ),
        )
        for n, event in enumerate(events, 1):
            emit(event)
            if args.limit is not None and n >= args.limit:
                break
    elif args.action == "list":
        for info in client.list_purgatories():
            emit(info)
    elif args.name is None:
        sys.stderr.write(f"purgatory: purgatories {args.action} needs a NAME\n")
        return 2
    elif args.action == "get":
        emit(client.get_purgatory(args.name))
    elif args.action == "create":
        emit(client.create_purgatory(args.name, _create_config(args)))
    else:
        emit({"cancelled": client.delete_purgatory(args.name)})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
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
            return _run(args, client, functools.partial(_emit, text=args.text), argv)
    except PurgatoryError as exc:
        sys.stderr.write(f"purgatory: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
