"""TLS and mutual TLS on loopback with certificates generated at test time."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    InvalidArgumentError,
    PurgatoryClient,
    UnavailableError,
)
from purgatory_client.cli import main as cli_main
from purgatory_server._service import ServerConfig, create_server
from purgatory_server._service.config.server_config import ConfigError, load_config

from tests.security.certs import CertFiles
from tests.security.conftest import ADMIN, tls_config
from tests.service.helpers import TEST_CONFIG, ServerThread


def _client(port: int, **kwargs: Any) -> AsyncPurgatoryClient:
    return AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=3, trust_env=False, **kwargs)


async def test_tls_serves_a_client_that_trusts_the_ca_and_refuses_plaintext(
    serve: Any, certs: CertFiles
) -> None:
    _, port = await serve(tls_config(TEST_CONFIG, certs))
    async with _client(port, tls_ca=certs.ca) as client:
        assert (await client.get_purgatory()).name == "default"
    async with _client(port) as plaintext:
        with pytest.raises(UnavailableError) as refused:
            await plaintext.get_purgatory()
    # The bare "Socket closed" a plaintext channel sees comes with what to try.
    assert "Socket closed" in refused.value.details
    assert "this client is plaintext: if the server serves TLS, pass tls_ca=" in str(refused.value)
    async with _client(port, tls=True) as system_roots:  # the test CA is not a system root
        with pytest.raises(UnavailableError) as untrusted:
            await system_roots.get_purgatory()
    assert "plaintext" not in str(untrusted.value)


async def test_mutual_tls_refuses_a_client_without_a_certificate_from_the_ca(
    serve: Any, certs: CertFiles
) -> None:
    _, port = await serve(tls_config(TEST_CONFIG, certs, mutual=True))
    async with _client(
        port, tls_ca=certs.ca, tls_cert=certs.client_cert, tls_key=certs.client_key
    ) as ok:
        await ok.try_complete_else_watch(["k"], 60_000, operation_id="m1")
        assert await ok.check_and_complete("k") == 1
    async with _client(port, tls_ca=certs.ca) as no_cert:
        with pytest.raises(UnavailableError):
            await no_cert.get_purgatory()
    async with _client(
        port, tls_ca=certs.ca, tls_cert=certs.rogue_cert, tls_key=certs.rogue_key
    ) as rogue:
        with pytest.raises(UnavailableError):
            await rogue.get_purgatory()


def test_sync_client_and_env_vars_with_mtls_and_a_token(
    certs: CertFiles, token_config: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tls_config(token_config, certs, mutual=True)
    monkeypatch.setenv("PURGATORY_TOKEN", ADMIN)
    monkeypatch.setenv("PURGATORY_TLS_CA", str(certs.ca))
    monkeypatch.setenv("PURGATORY_TLS_CERT", str(certs.client_cert))
    monkeypatch.setenv("PURGATORY_TLS_KEY", str(certs.client_key))
    with ServerThread(config) as st, PurgatoryClient(st.target, timeout=5) as client:
        assert client.create_purgatory("via-env").name == "via-env"
        assert [p.name for p in client.list_purgatories()] == ["default", "via-env"]


def test_cli_with_tls_and_token(
    certs: CertFiles,
    token_config: ServerConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("PURGATORY_TOKEN", "PURGATORY_TLS_CA", "PURGATORY_TLS_CERT", "PURGATORY_TLS_KEY"):
        monkeypatch.delenv(var, raising=False)
    with ServerThread(tls_config(token_config, certs)) as st:
        base = ["--target", st.target, "--tls-ca", str(certs.ca)]
        assert cli_main([*base, "--token", ADMIN, "purgatories"]) == 0
        out = capsys.readouterr().out
        assert [json.loads(line)["name"] for line in out.splitlines()] == ["default"]
        assert cli_main([*base, "health"]) == 0  # health needs no token
        capsys.readouterr()
        assert cli_main([*base, "purgatories"]) == 1  # no token
        err = capsys.readouterr().err
        assert err.startswith("purgatory: UNAUTHENTICATED") and err.count("\n") == 1
        monkeypatch.setenv("PURGATORY_TOKEN", ADMIN)
        assert cli_main([*base, "purgatories", "get", "default"]) == 0


def test_client_rejects_half_a_key_pair_and_unreadable_files(certs: CertFiles) -> None:
    with pytest.raises(InvalidArgumentError, match="tls_cert"):
        PurgatoryClient("127.0.0.1:1", tls_cert=certs.client_cert, trust_env=False)
    with pytest.raises(InvalidArgumentError, match="tls_ca"):
        PurgatoryClient("127.0.0.1:1", tls_ca="/nonexistent/ca.pem", trust_env=False)


async def test_server_tls_configuration_errors(certs: CertFiles, tmp_path: Path) -> None:
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello")
    bad = [
        replace(TEST_CONFIG, tls_cert=str(certs.server_cert)),  # no key
        replace(TEST_CONFIG, tls_client_ca=str(certs.ca)),  # mTLS without TLS
        replace(TEST_CONFIG, tls_cert="/nonexistent.crt", tls_key=str(certs.server_key)),
        replace(TEST_CONFIG, tls_cert=str(not_pem), tls_key=str(certs.server_key)),
    ]
    for config in bad:
        with pytest.raises(ConfigError):
            server, _ = await create_server("127.0.0.1:0", config)
            await server.stop(0)
    env = {
        "PURGATORY_TLS_CERT": str(certs.server_cert),
        "PURGATORY_TLS_KEY": str(certs.server_key),
        "PURGATORY_TLS_CLIENT_CA": str(certs.ca),
    }
    loaded = load_config(None, env=env)
    assert (loaded.tls_cert, loaded.tls_key, loaded.tls_client_ca) == tuple(env.values())
