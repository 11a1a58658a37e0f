"""The tests never read the checkout's state: a user who followed the README has a
populated ``./data`` (``purgatory purgatories create orders --durable`` against
``make serve``), and the tests must pass beside it.

The guard runs the multi-worker tests (the ones that start ``purgatory-server`` without a
``--data-dir`` of their own) in a child pytest whose working directory holds such a
``data/``, created by a real durable server as the README's walk-through creates it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from purgatory_client import PurgatoryClient, PurgatoryConfig

from harness import ServerProcess

ROOT = Path(__file__).resolve().parent.parent


def _populate(beside: Path) -> None:
    """``beside/data`` as ``make serve`` + ``purgatories create orders --durable`` leave it."""
    data = beside / "data"
    with (
        ServerProcess(beside / "populate", ["--data-dir", str(data)]) as server,
        PurgatoryClient(server.address, timeout=10) as client,
    ):
        client.create_purgatory("orders", PurgatoryConfig(durable=True))
        client.try_complete_else_watch(["k"], 600_000, purgatory="orders")
    assert (data / "orders").is_dir()


def test_the_workers_tests_pass_beside_a_populated_data_directory(tmp_path: Path) -> None:
    beside = tmp_path / "checkout"
    beside.mkdir()
    _populate(beside)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
    # The child imports the project from ROOT as this process does, whatever its cwd.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")),
            str(ROOT / "tests" / "workers" / "test_workers.py"),
        ],
        cwd=beside,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
