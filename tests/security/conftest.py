"""Fixtures of the security tests: test-time certificates and token configurations."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from purgatory_server._service import ServerConfig
from purgatory_server._service.config.server_config import from_mapping

from tests.security.certs import CertFiles, make_certs
from tests.service.conftest import serve  # noqa: F401 - the same server fixture
from tests.service.helpers import TEST_CONFIG

# Secrets, one per way of configuring a token; none may ever reach a log.
ADMIN = "admin-secret-token-a1"
WATCHER = "watcher-secret-token-b2"
SIGNALLER = "signaller-secret-token-c3"
FORCER = "forcer-secret-token-d4"
SUBSCRIBER = "subscriber-secret-token-e5"
SECRETS = (ADMIN, WATCHER, SIGNALLER, FORCER, SUBSCRIBER)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def token_config(tmp_path: Path) -> Iterator[ServerConfig]:
    """TEST_CONFIG with five tokens, configured in each supported way."""
    token_file = tmp_path / "signaller.token"
    token_file.write_text(SIGNALLER + "\n")
    digest = hashlib.sha256(WATCHER.encode()).hexdigest()
    text = f"""
[[auth.tokens]]
name = "admin"
token = "{ADMIN}"
permissions = ["admin"]

[[auth.tokens]]
name = "watcher"
sha256 = "{digest}"
permissions = ["watch"]
purgatories = ["default"]

[[auth.tokens]]
name = "signaller"
token_file = "{token_file}"
permissions = ["signal"]
purgatories = ["default"]

[[auth.tokens]]
name = "forcer"
token_env = "TEST_FORCER_TOKEN"
permissions = ["force"]
purgatories = ["default"]

[[auth.tokens]]
name = "subscriber"
token = "{SUBSCRIBER}"
permissions = ["subscribe"]
purgatories = ["default"]
"""
    yield from_mapping(tomllib.loads(text), TEST_CONFIG, {"TEST_FORCER_TOKEN": FORCER})


def tls_config(base: ServerConfig, certs: CertFiles, *, mutual: bool = False) -> ServerConfig:
    return replace(
        base,
        tls_cert=str(certs.server_cert),
        tls_key=str(certs.server_key),
        tls_client_ca=str(certs.ca) if mutual else "",
    )
