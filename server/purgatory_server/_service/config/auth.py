"""Bearer tokens with per-purgatory permissions: configuration and checks (no gRPC).

Each configured token grants a set of :class:`Permission` on a set of purgatories (names,
or ``*`` for every one). A caller presents ``authorization: Bearer <token>``; the server
keeps only SHA-256 digests of tokens and compares the presented token's digest with
every configured digest in constant time, no early exit. Tokens are never logged:
:class:`TokenGrant` has no token, and its digest is left out of its ``repr``.

Permissions (``admin`` implies the others on the same purgatories):

- ``watch``: TryCompleteElseWatch, BatchTryCompleteElseWatch, GetOperation,
  ListOperations, ListSchedules;
- ``signal``: CheckAndComplete, BatchCheckAndComplete;
- ``force``: ForceComplete, Cancel, Reschedule, UpsertSchedule, DeleteSchedule (each can
  end an operation another caller registered: replacing or deleting a schedule cancels
  its armed occurrence);
- a Session frame: ``watch``/``signal``/``force`` for its watches/signals/force-completes
  (checked per frame by the edge);
- ``subscribe``: Subscribe (a worker group's member too), Ack, Nack, AckBatch, ExtendLease,
  ListDeadLetters, Redrive, DiscardDeadLetters, ListGroups;
- ``admin``: CreatePurgatory, DeletePurgatory, DeleteGroup.

GetPurgatory needs any permission on that purgatory, ListPurgatories any valid token.

Configuration (TOML ``[[auth.tokens]]``), each token from exactly one of ``token`` (the
secret itself), ``sha256`` (its hex digest), ``token_file`` (a file holding it) or
``token_env`` (an environment variable holding it)::

    [[auth.tokens]]
    name = "orders-service"          # shown in logs instead of the token
    token_env = "ORDERS_TOKEN"
    permissions = ["watch", "signal"]
    purgatories = ["orders"]         # default ["*"]

Thread-safety: immutable after construction; any thread.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from purgatory_server._service.model.errors import PermissionDenied, Unauthenticated

__all__ = [
    "ALL_PURGATORIES",
    "AuthConfig",
    "Authorizer",
    "Permission",
    "TokenGrant",
    "parse_auth",
]

ALL_PURGATORIES = "*"
_SCHEME = "bearer "


class Permission(enum.Enum):
    WATCH = "watch"
    SIGNAL = "signal"
    FORCE = "force"
    SUBSCRIBE = "subscribe"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """What one token may do; ``name`` identifies it in logs (never the token)."""

    name: str
    digest: bytes = field(repr=False)
    permissions: frozenset[Permission]
    purgatories: frozenset[str]

    def allows(self, permission: Permission | None, purgatory: str | None) -> bool:
        """``permission`` None: any permission; ``purgatory`` None: no purgatory named.

        A rule that names neither (ListPurgatories, opening a Session) needs only a valid
        token, even one granted no permission at all (``permissions = []``).
        """
        if purgatory is not None and not (
            ALL_PURGATORIES in self.purgatories or purgatory in self.purgatories
        ):
            return False
        if permission is None:
            return purgatory is None or bool(self.permissions)
        return permission in self.permissions or Permission.ADMIN in self.permissions


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """The configured tokens; none means authentication is off."""

    tokens: tuple[TokenGrant, ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _secret(entry: Mapping[str, Any], where: str, env: Mapping[str, str]) -> bytes:
    sources = [k for k in ("token", "sha256", "token_file", "token_env") if k in entry]
    if len(sources) != 1:
        raise ValueError(f"{where}: give exactly one of token, sha256, token_file, token_env")
    kind = sources[0]
    raw = entry[kind]
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"{where}.{kind}: expected a non-empty string")
    if kind == "sha256":
        try:
            digest = bytes.fromhex(raw)
        except ValueError:
            digest = b""
        if len(digest) != hashlib.sha256().digest_size:
            raise ValueError(f"{where}.sha256: expected 64 hex characters")
        return digest
    if kind == "token_file":
        try:
            token = Path(raw).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{where}.token_file: cannot read {raw}: {exc}") from None
    elif kind == "token_env":
        token = env.get(raw, "").strip()
        if not token:
            raise ValueError(f"{where}.token_env: environment variable {raw} is not set")
    else:
        token = raw
    if not token:
        raise ValueError(f"{where}: the token is empty")
    return _digest(token)


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: expected a list of non-empty strings")
    return list(value)


def parse_auth(raw: Any, env: Mapping[str, str]) -> AuthConfig:
    """The ``[auth]`` TOML table as an :class:`AuthConfig`; ValueError names the problem."""
    if not isinstance(raw, Mapping):
        raise ValueError("auth must be a table")
    unknown = set(raw) - {"tokens"}
    if unknown:
        raise ValueError(f"unknown option auth.{sorted(unknown)[0]}")
    entries = raw.get("tokens", [])
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise ValueError("auth.tokens must be an array of tables")
    grants: list[TokenGrant] = []
    for i, entry in enumerate(entries):
        where = f"auth.tokens[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected a table")
        allowed = {"name", "token", "sha256", "token_file", "token_env", "permissions"}
        extra = set(entry) - allowed - {"purgatories"}
        if extra:
            raise ValueError(f"unknown option {where}.{sorted(extra)[0]}")
        name = entry.get("name", f"token-{i}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name: expected a non-empty string")
        known = {p.value: p for p in Permission}
        asked = _names(entry.get("permissions"), f"{where}.permissions")
        bad = [p for p in asked if p not in known]
        if bad:
            raise ValueError(
                f"{where}.permissions: {bad[0][:100]!r} is not one of {', '.join(known)}"
            )
        permissions = frozenset(known[p] for p in asked)
        purgatories = frozenset(
            _names(entry.get("purgatories", [ALL_PURGATORIES]), f"{where}.purgatories")
        )
        grants.append(TokenGrant(name, _secret(entry, where, env), permissions, purgatories))
    digests = [g.digest for g in grants]
    if len(set(digests)) != len(digests):
        raise ValueError("auth.tokens: the same token is configured twice")
    return AuthConfig(tuple(grants))


class Authorizer:
    """Checks a request's ``authorization`` header against :class:`AuthConfig`."""

    __slots__ = ("_grants",)

    def __init__(self, config: AuthConfig) -> None:
        self._grants = config.tokens

    def authenticate(self, header: str | None) -> TokenGrant:
        """The grant of a valid ``Bearer`` token; Unauthenticated otherwise."""
        if not header:
            raise Unauthenticated("missing authorization metadata (Bearer token)")
        if not header[: len(_SCHEME)].lower() == _SCHEME:
            raise Unauthenticated("authorization metadata must be 'Bearer <token>'")
        digest = _digest(header[len(_SCHEME) :].strip())
        found: TokenGrant | None = None
        for grant in self._grants:  # every digest is compared: no early exit
            if hmac.compare_digest(grant.digest, digest) and found is None:
                found = grant
        if found is None:
            raise Unauthenticated("invalid token")
        return found

    def authorize(
        self, grant: TokenGrant, permission: Permission | None, purgatory: str | None
    ) -> None:
        """PermissionDenied unless ``grant`` allows ``permission`` on ``purgatory``."""
        if not grant.allows(permission, purgatory):
            what = permission.value if permission is not None else "any"
            where = f" on purgatory {purgatory[:100]!r}" if purgatory is not None else ""
            raise PermissionDenied(f"token {grant.name!r} lacks the {what} permission{where}")
