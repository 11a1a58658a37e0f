"""`make serve` installs the server's extras only; `make test` (and install) the dev tools."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _recipe(target: str) -> str:
    # -B: as if nothing were installed yet; -n: print the commands without running them.
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target, "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _extras(recipe: str) -> set[str]:
    (spec,) = re.findall(r"pip install .*-e '\.\[([a-z,]+)\]'", recipe)
    return set(spec.split(","))


def test_serve_installs_only_the_server_extras() -> None:
    extras = _extras(_recipe("serve"))
    assert extras == {"server", "client"}
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = {d for extra in extras for d in deps[extra]}
    assert not any(d.startswith(("pytest", "mypy", "ruff", "grpcio-tools")) for d in installed)


def test_test_profile_installs_the_dev_tools() -> None:
    assert "dev" in _extras(_recipe("install"))


def test_serve_says_what_it_installs_and_passes_args_to_the_server() -> None:
    recipe = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-B",
            "serve",
            "VENV=/nonexistent-venv",
            "ARGS=--listen 127.0.0.1:50061",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    # Progress before the long, otherwise silent install (pip's lines kept, filtered).
    assert "make serve: installing the server and the CLI" in recipe
    assert "the first time this takes" in recipe and "grep --line-buffered" in recipe
    assert recipe.rstrip().endswith("-m purgatory_server --listen 127.0.0.1:50061")


def test_cluster_ports_can_be_moved() -> None:
    recipe = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "cluster",
            "VENV=/nonexistent-venv",
            "CLUSTER_PORT=50061",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "-m purgatory_server._cluster.local --dir .cluster --port 50061" in recipe
