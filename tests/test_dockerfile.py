"""The Dockerfile's health check and build context, without a Docker engine: the
HEALTHCHECK command runs as the image would run it (``sh -c``, with the image's PATH
holding ``purgatory``) against a real server, on the port PURGATORY_LISTEN names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.service.helpers import ServerThread

ROOT = Path(__file__).resolve().parent.parent


def _healthcheck() -> list[str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    [cmd] = re.findall(r"^HEALTHCHECK .*?CMD (\[.*\])\s*$", text, re.M)
    command: list[str] = json.loads(cmd)
    return command


def _probe(listen: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PURGATORY_LISTEN"] = listen
    return subprocess.run(
        _healthcheck(), env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_health_check_follows_purgatory_listen() -> None:
    with ServerThread() as server:
        port = server.target.rpartition(":")[2]
        healthy = _probe(f"0.0.0.0:{port}")
        assert healthy.returncode == 0, healthy.stderr
        assert json.loads(healthy.stdout) == {"status": "SERVING"}
    # Not the fixed 127.0.0.1:50051 any more: nothing serves there now.
    down = _probe(f"0.0.0.0:{port}")
    assert down.returncode == 1 and "unhealthy: UNAVAILABLE" in down.stderr


def test_build_context_leaves_out_what_pip_install_does_not_need() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().splitlines())
    assert {"**/node_modules", ".cluster", "pipeline-out", ".venv", "data"} <= ignored
