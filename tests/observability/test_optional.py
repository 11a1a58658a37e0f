"""Observability is optional: off by default (nothing of OpenTelemetry imported), a
clear one-line error without the extra, and the real flags serving a real scrape."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from purgatory_server._service import ServerConfig
from purgatory_server._service.observability import loader

from harness import ServerProcess

OFF_CHECK = """
import asyncio, sys
from purgatory_server._service import ServerConfig, create_server

async def main():
    server, port = await create_server("127.0.0.1:0", ServerConfig(data_dir=sys.argv[1]))
    await server.stop(0)

asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
print("no opentelemetry")
"""


def test_off_by_default_imports_no_opentelemetry(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", OFF_CHECK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no opentelemetry"


def test_off_needs_nothing() -> None:
    # Asking for it without the extra (really missing, not mocked) is one line naming the
    # extra: tests/test_terminal.py, under tests/without_observability.py.
    assert loader.telemetry_from_config(ServerConfig()) is None


def test_metrics_listen_flag_serves_prometheus(tmp_path: Path) -> None:
    # Port 0: the server says which port it bound in its log line (an explicit port is
    # what the README's block runs: tests/test_readme.py).
    args = ["--data-dir", str(tmp_path / "data"), "--tracing"]
    args += ["--metrics-listen", "127.0.0.1:0"]
    with ServerProcess(tmp_path, args) as server:
        url = server.wait_log(r"metrics: (http://127\.0\.0\.1:\d+/metrics)")[1]
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read().decode()
        assert 'purgatory_operations_delayed{purgatory_name="default"} 0.0' in body
    assert server.stop() == 0, server.log_text()


async def test_a_taken_metrics_port_fails_start_up_naming_it(tmp_path: Path) -> None:
    from purgatory_server._service import create_server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        # listen as create_server's: the default (50051) may be the port the OS just gave.
        config = ServerConfig(data_dir=str(tmp_path), listen="127.0.0.1:0", metrics_listen=address)
        with pytest.raises(OSError, match=f"cannot serve metrics on {address}"):
            await create_server("127.0.0.1:0", config)
