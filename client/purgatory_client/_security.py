"""How a client reaches a server: plaintext or TLS (optionally with a client certificate
for mutual TLS), and the bearer token sent with every call.

Arguments win over environment variables, which are read only where an argument is
left out and ``trust_env`` is true (the default):

===================== ======================== =========================================
argument              environment variable     meaning
===================== ======================== =========================================
``token``             ``PURGATORY_TOKEN``      sent as ``authorization: Bearer <token>``
``tls_ca``            ``PURGATORY_TLS_CA``     PEM file of the CA(s) to trust (TLS on)
``tls_cert``          ``PURGATORY_TLS_CERT``   PEM client certificate (mutual TLS)
``tls_key``           ``PURGATORY_TLS_KEY``    PEM private key of ``tls_cert``
``tls``               (none)                   TLS on with the system's trusted roots
===================== ======================== =========================================

TLS is on when ``tls`` is true or any ``tls_*`` file is given. A token over plaintext is
allowed (loopback, a TLS-terminating proxy) but travels unencrypted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from purgatory_client.errors import invalid_argument

__all__ = ["Security", "resolve_security"]

ENV_TOKEN = "PURGATORY_TOKEN"
ENV_TLS_CA = "PURGATORY_TLS_CA"
ENV_TLS_CERT = "PURGATORY_TLS_CERT"
ENV_TLS_KEY = "PURGATORY_TLS_KEY"


@dataclass(frozen=True)
class Security:
    """Resolved transport security and credentials (the token is kept out of ``repr``)."""

    token: str | None = field(default=None, repr=False)
    tls: bool = False
    root_certificates: bytes | None = field(default=None, repr=False)
    certificate_chain: bytes | None = field(default=None, repr=False)
    private_key: bytes | None = field(default=None, repr=False)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Call metadata: the authorization header when a token is set."""
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


def _pem(option: str, path: str | os.PathLike[str] | None) -> bytes | None:
    if path is None or str(path) == "":
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise invalid_argument(option, f"cannot read {path}: {exc.strerror or exc}") from None


def resolve_security(
    *,
    token: str | None,
    tls: bool | None,
    tls_ca: str | os.PathLike[str] | None,
    tls_cert: str | os.PathLike[str] | None,
    tls_key: str | os.PathLike[str] | None,
    trust_env: bool,
    env: Mapping[str, str] | None = None,
) -> Security:
    """Combine arguments and (if ``trust_env``) environment variables; read the PEM files."""
    environ: Mapping[str, str] = (os.environ if env is None else env) if trust_env else {}
    token = token if token is not None else environ.get(ENV_TOKEN) or None
    ca = tls_ca if tls_ca is not None else environ.get(ENV_TLS_CA) or None
    cert = tls_cert if tls_cert is not None else environ.get(ENV_TLS_CERT) or None
    key = tls_key if tls_key is not None else environ.get(ENV_TLS_KEY) or None
    if token is not None and (not isinstance(token, str) or "\n" in token or not token.strip()):
        raise invalid_argument("token", "must be a non-empty single-line string")
    if (cert is None) != (key is None):
        raise invalid_argument("tls_cert", "tls_cert and tls_key must be given together")
    on = bool(tls) or any(p is not None for p in (ca, cert, key))
    if tls is False and on:
        raise invalid_argument("tls", "tls=False contradicts the tls_* files given")
    return Security(
        token=token.strip() if token else None,
        tls=on,
        root_certificates=_pem("tls_ca", ca),
        certificate_chain=_pem("tls_cert", cert),
        private_key=_pem("tls_key", key),
    )
