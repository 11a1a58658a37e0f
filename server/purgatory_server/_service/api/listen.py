"""The listen address: parsed strictly, and checked before gRPC tries to bind it.

gRPC takes ``localhost`` to mean port 443 and reports a busy port with a generic
``RuntimeError``. Here ``listen`` must be ``HOST:PORT`` (``[::1]:PORT`` for IPv6), and a
plain socket tries the bind first so the OS's reason is reported in one line.
"""

from __future__ import annotations

import contextlib
import socket

from purgatory_server._service.config.server_config import ConfigError

__all__ = ["check_bindable", "parse_listen"]


def parse_listen(address: str, option: str = "listen") -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``; ConfigError (naming ``option``) otherwise.

    A ``unix:`` socket path is passed through as ``(address, 0)`` (nothing to check).
    """
    if address.startswith(("unix:", "unix-abstract:")):
        return address, 0
    host, sep, port_text = address.rpartition(":")
    if not sep:
        raise ConfigError(
            f"{option}: {address[:100]!r} has no port; use HOST:PORT (e.g. 127.0.0.1:50051)"
        )
    if not host:
        raise ConfigError(f"{option}: {address[:100]!r} has no host (0.0.0.0 for all IPv4)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"{option}: port {port_text[:20]!r} is not a number in [0, 65535]")
    return host, int(port_text)


def check_bindable(host: str, port: int) -> None:
    """OSError with the OS's reason if ``host:port`` cannot be listened on; port 0 and
    addresses that do not resolve here are left to gRPC."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    problem: OSError | None = None
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
            if family == socket.AF_INET6:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(sockaddr)
                return  # gRPC needs one address of the name to work
            except OSError as exc:
                problem = exc
    if problem is not None:
        raise OSError(f"cannot listen on {host}:{port}: {problem.strerror or problem}")
