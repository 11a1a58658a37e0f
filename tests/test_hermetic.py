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

import ast
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


# A config that only answers ``validate()`` or names telemetry never starts a server.
_SERVERLESS_CALLERS = ("validate", "telemetry_from_config")


def _server_configs_without_a_data_dir(source: str) -> list[int]:
    """Lines of ``source`` building a ServerConfig that may start a server (it is not the
    receiver of ``.validate()`` nor an argument of ``telemetry_from_config``) without
    naming its ``data_dir``: such a server reads the durable catalog under the working
    directory's ``./data``, the checkout's, and opens the journals it finds there."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _SERVERLESS_CALLERS:
            allowed.add(id(node.value))
        if isinstance(node, ast.Call) and _called_name(node) in _SERVERLESS_CALLERS:
            allowed.update(id(arg) for arg in node.args)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _called_name(node) == "ServerConfig"
        and id(node) not in allowed
        and not any(kw.arg in ("data_dir", None) for kw in node.keywords)
    ]


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def test_every_in_process_server_the_tests_build_has_its_own_data_dir() -> None:
    # The child run above covers only GUARDED; an in-process server elsewhere that leaves
    # data_dir at its default opens the checkout's ./data (a parallel run of two such tests
    # then fails on the journal's lock), so every test config names one.
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line in _server_configs_without_a_data_dir(path.read_text())
    ]
    assert offenders == []


def test_the_data_dir_check_finds_a_config_without_one() -> None:
    source = (
        "a = ServerConfig(listen='x')\n"
        "ServerConfig(limits=l).validate()\n"
        "telemetry_from_config(ServerConfig())\n"
        "b = ServerConfig(listen='x', data_dir=d)\n"
        "c = config.ServerConfig(**fields)\n"
    )
    assert _server_configs_without_a_data_dir(source) == [1]
