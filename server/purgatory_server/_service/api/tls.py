"""TLS and mutual TLS server credentials from the configuration's PEM files.

``tls_cert`` + ``tls_key`` turn TLS on; ``tls_client_ca`` adds mutual TLS: a client must
present a certificate signed by that CA or the handshake fails (no RPC runs, health
checking included). Files are read once at start-up.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from purgatory_server._service.config.server_config import ConfigError, ServerConfig

__all__ = ["server_credentials"]


def _read(option: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{option}: cannot read {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise ConfigError(f"{option}: {path} is not a PEM file")
    return data


def server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """The credentials for ``add_secure_port``, or None for plaintext (TLS off)."""
    if not config.tls_cert and not config.tls_key:
        if config.tls_client_ca:
            raise ConfigError("tls_client_ca needs tls_cert and tls_key")
        return None
    if not config.tls_cert or not config.tls_key:
        raise ConfigError("tls_cert and tls_key must be given together")
    cert = _read("tls_cert", config.tls_cert)
    key = _read("tls_key", config.tls_key)
    client_ca = _read("tls_client_ca", config.tls_client_ca) if config.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )
