"""Every Python script under examples/python runs, as a user would run it, against a real
server with the default limits, and prints what its docstring promises. (The Node.js
examples run the same way from client/node/test/examples.test.mjs.)"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_server._service import ServerConfig

from tests.service.helpers import ServerThread

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "python"

# One line each script must print (its result; the script also exits 1 on a wrong one).
EXPECTED = {
    "acks.py": "produce answered: COMPLETED, acked by ['broker-1', 'broker-2', 'broker-3']",
    "fetch.py": "fetch-2: EXPIRED with 200 bytes (m0:200;)",
    "delayed.py": "order-3 still unpaid after 1000 ms: cancelling it",
    "subscription.py": "expired only: ['job-1', 'job-3', 'job-5']",
    "schedule.py": "3 firings on the 250 ms grid, no duplicates",
}


def test_every_example_is_tested() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = ServerConfig(
        listen="127.0.0.1:0", grace_s=0.5, data_dir=str(tmp_path_factory.mktemp("data"))
    )
    with ServerThread(config) as st:
        yield st.target


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs(script: str, target: str) -> None:
    # The server from PURGATORY_TARGET, as the CLI reads it (tests/test_readme.py passes
    # HOST:PORT as an argument, the README's way).
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env={**os.environ, "PURGATORY_TARGET": target},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert EXPECTED[script] in done.stdout.splitlines(), done.stdout
