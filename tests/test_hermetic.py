"""The tests never read the checkout's state: a user who followed the README has a
populated ``./data`` (``purgatory purgatories create orders --durable`` against
``make serve``), often with ``make serve`` still running on it, and the tests must pass
beside it.

The guard runs the tests that start servers (``GUARDED``: multi-worker servers, and
in-process servers that configure a purgatory named like the README's) in a child pytest
whose working directory holds such a ``data/``, created by a real durable server as the
README's walk-through creates it and still served by it: a test server that opened the
checkout's ``./data`` would find ``orders``'s journal locked and fail to start, one that
wrote there would leave a new entry.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from purgatory_client import PurgatoryClient, PurgatoryConfig

from harness import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
GUARDED = (
    "workers/test_workers.py",
    "groups/test_fencing.py",
    "groups/test_members.py",
    "client/test_dispatcher_errors.py",
    "client/test_cli_output.py",
)


# A child pytest of five modules: a minute on a quiet 2-core machine, several on a loaded
# one; its own subprocess limit (600 s) decides, not pytest's per-test default.
@pytest.mark.timeout(660)
def test_the_tests_pass_beside_a_populated_and_served_data_directory(tmp_path: Path) -> None:
    beside = tmp_path / "checkout"
    data = beside / "data"
    user = ServerProcess(beside / "make-serve", ["--data-dir", str(data)])
    with user, PurgatoryClient(user.address, timeout=10) as client:
        client.create_purgatory("orders", PurgatoryConfig(durable=True))
        client.try_complete_else_watch(["k"], 600_000, purgatory="orders")
        before = sorted(p.name for p in data.iterdir())
        assert before == ["orders"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
        # The child imports the project from ROOT as this process does, whatever its cwd.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
                *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")),
                *(str(ROOT / "tests" / name) for name in GUARDED),
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
        assert sorted(p.name for p in data.iterdir()) == before  # nothing written there
        assert client.get_purgatory("orders").pending == 1  # the user's server unharmed
