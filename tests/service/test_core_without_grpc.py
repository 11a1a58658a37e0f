"""The service core loads without grpc: only the edge (servicer, session adapters, edge,
status mapping, app, TLS, RPC telemetry) imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import purgatory_server

SERVICE = Path(purgatory_server.__file__).parent / "_service"
EDGE = {"app.py", "edge.py", "servicer.py", "status.py", "tls.py", "telemetry/rpc.py"}


def _imports_grpc(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(n == "grpc" or n.startswith(("grpc.", "grpc_")) for n in names):
            return True
    return False


def test_only_the_edge_imports_grpc() -> None:
    importers = {
        p.relative_to(SERVICE).as_posix() for p in SERVICE.rglob("*.py") if _imports_grpc(p)
    }
    assert importers <= EDGE, importers - EDGE
    assert "errors.py" not in importers


def test_the_core_runs_without_grpc_loaded() -> None:
    code = (
        "import sys, asyncio\n"
        "from purgatory_server._service.named_purgatory import NamedPurgatory\n"
        "from purgatory_server._service.registry import PurgatoryRegistry\n"
        "from purgatory_server._service.validation import operation_requests\n"
        "from purgatory_server._service.durable import durable_factory\n"
        "from purgatory_server._service.config import Limits, PurgatorySettings\n"
        "async def main():\n"
        "    r = PurgatoryRegistry(Limits(), PurgatorySettings(), asyncio.get_running_loop())\n"
        "    r.create(r.settings_for('p', None))\n"
        "    await r.shutdown()\n"
        "asyncio.run(main())\n"
        "loaded = sorted(m for m in sys.modules if m == 'grpc' or m.startswith('grpc'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
