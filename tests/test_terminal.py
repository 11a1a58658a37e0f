"""Clean failures for a person at a terminal: ``purgatory-server`` and ``purgatory``
print ONE line and exit non-zero for a busy port, a bad --listen/--target (a missing
port is an error, not 443), an unreadable or invalid config file, a bad flag value and
an observability flag without the extra.

The server runs as `make serve` installs it: without the ``observability`` extra
(``tests/without_observability.py`` makes its packages unimportable)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_client.cli import main as cli_main

from harness import ServerProcess, free_port

WITHOUT_EXTRA = [sys.executable, str(Path(__file__).parent / "without_observability.py")]


def _server(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
    return subprocess.run(
        [*WITHOUT_EXTRA, "purgatory_server", "--data-dir", str(cwd / "data"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        check=False,
    )


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_server_busy_port_is_one_line(busy_port: int, tmp_path: Path) -> None:
    result = _server("--listen", f"127.0.0.1:{busy_port}", cwd=tmp_path)
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert f"cannot listen on 127.0.0.1:{busy_port}" in line
    assert "Address already in use" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--listen", "localhost"], "has no port"),
        (["--listen", "127.0.0.1:99999"], "not a number in [0, 65535]"),
        (["--config", "/nonexistent/purgatory.toml"], "cannot read config file"),
        (["--grace", "soon"], "invalid float value"),
        (["--fsync", "sometimes"], "invalid choice"),
        (["--no-such-flag"], "unrecognized arguments"),
    ],
)
def test_server_bad_flags_and_config_are_one_line(
    args: list[str], expected: str, tmp_path: Path
) -> None:
    result = _server(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert expected in _one_line(result.stderr)


@pytest.mark.parametrize(
    "args",
    [["--tracing"], ["--metrics-listen", "127.0.0.1:0", "--tracing"], ["--otlp-endpoint", "x"]],
)
def test_observability_without_the_extra_is_one_line_naming_it(
    args: list[str], tmp_path: Path
) -> None:
    # find_spec("opentelemetry.sdk") raises (not returns None) when "opentelemetry" itself
    # is missing: that was a ModuleNotFoundError traceback.
    result = _server("--listen", "127.0.0.1:0", *args, cwd=tmp_path)
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert "pip install 'purgatory-grpc[observability]'" in line
    # Outside a call there are no ids: no empty "trace_id= span_id=" fields.
    assert "trace_id" not in line and "span_id" not in line, line


@pytest.mark.parametrize("workers", ["1", "2"])
def test_metrics_on_the_listen_port_is_one_line_naming_the_metrics_listener(
    workers: str, tmp_path: Path
) -> None:
    port = free_port()  # nothing binds it: the configuration is refused first
    address = f"127.0.0.1:{port}"
    result = _server(
        *("--workers", workers, "--listen", address, "--metrics-listen", address), cwd=tmp_path
    )
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert f"metrics_listen {address} takes the port of listen {address}" in line, line
    assert "add_port" not in result.stderr


def test_server_invalid_config_file_is_one_line(tmp_path: Path) -> None:
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("listen = [")
    result = _server("--config", str(bad_toml), cwd=tmp_path)
    assert result.returncode == 2 and "not valid TOML" in _one_line(result.stderr)
    bounds = tmp_path / "bounds.toml"
    bounds.write_text("[defaults]\nwheel_size = 1\n")
    result = _server("--config", str(bounds), cwd=tmp_path)
    assert result.returncode == 2 and "wheel_size" in _one_line(result.stderr)
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('listen = "127.0.0.1:0"  # café\n'.encode("latin-1"))
    result = _server("--config", str(latin1), cwd=tmp_path)
    assert result.returncode == 2
    assert f"config file {latin1} is not UTF-8 text" in _one_line(result.stderr)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = cli_main(list(argv))
    except SystemExit as exc:  # argparse exits for usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "status", "expected"),
    [
        (["--target", "localhost", "purgatories"], 2, "is not HOST:PORT"),
        (["watch", "k", "--timeout-ms", "soon"], 2, "invalid int value"),
        (["watch", "k", "--timeout-ms", "-1"], 2, "--timeout-ms: must be at least 1"),
        (["--tls-ca", "/nonexistent/ca.pem", "purgatories"], 1, "tls_ca: cannot read"),
        (["--target", "127.0.0.1:1", "purgatories"], 1, "UNAVAILABLE"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_cli_failures_are_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    status: int,
    expected: str,
) -> None:
    for var in ("PURGATORY_TARGET", "PURGATORY_TOKEN", "PURGATORY_TLS_CA"):
        monkeypatch.delenv(var, raising=False)
    code, err = _cli(capsys, *argv)
    assert code == status
    assert expected in _one_line(err)


def test_listen_addresses_are_parsed_strictly() -> None:
    from purgatory_server._service.api.listen import parse_listen
    from purgatory_server._service.config.server_config import ConfigError

    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:50051") == ("::1", 50051)
    assert parse_listen("unix:/tmp/purgatory.sock") == ("unix:/tmp/purgatory.sock", 0)
    for bad in ("localhost", ":5", "host:", "host:70000", "host:x"):
        with pytest.raises(ConfigError, match="listen"):
            parse_listen(bad)


def test_a_second_server_on_the_same_data_directory_suggests_data_dir(tmp_path: Path) -> None:
    command = [*WITHOUT_EXTRA, "purgatory_server", "--durable"]
    with ServerProcess(tmp_path / "first", command=command, cwd=tmp_path):
        result = _server("--listen", "127.0.0.1:0", "--durable", cwd=tmp_path)
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert "in use by another journal" in line and "its own --data-dir" in line
