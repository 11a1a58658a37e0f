"""The README's examples run as written, so the front page cannot drift from the code.

Every fenced block of README.md is either run here (its Python executed, its shell lines
run one by one with bash against a real server on 127.0.0.1:0) or listed in
``NOT_RUN`` with the reason; a new block that is neither fails
:func:`test_every_block_is_run_or_explained`. Shell lines reach the test's server through
``PURGATORY_TARGET`` (the CLI), a ``HOST:PORT`` argument (the example scripts) or a free
port put in place of the README's fixed one, and ``.venv/bin/`` is this interpreter's
directory (the same virtual environment when run by ``make test``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from purgatory_client import OperationState, PurgatoryClient, PurgatoryError
from purgatory_server._service import ServerConfig
from purgatory_server._service.config.server_config import Limits

from harness import ServerProcess
from tests.service.helpers import TEST_CONFIG, ServerThread

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# (language, body) of every fenced block, in order.
FENCED = re.findall(r"^```(\w*)\n(.*?)^```", README, re.S | re.M)
BIN = str(Path(sys.executable).parent) + "/"

# Blocks run by a test below, by a line that identifies them.
RUN = {
    "DelayedOperationPurgatory": "test_engine_example_runs",
    "Condition.all_keys()": "test_client_example_runs_against_a_real_server",
    "watch_many": "test_many_operations_example_runs_against_a_real_server",
    "purgatory watch order-42": "test_cli_walkthrough_runs_line_by_line",
    "examples/python/acks.py": "test_examples_block_runs",
    "--metrics-listen 127.0.0.1:9464": "test_metrics_block_runs",
    "iter_operations": "test_delayed_message_example_runs_against_a_real_server",
}
# Blocks no test can run, and why.
NOT_RUN = {
    "make serve   #": "`make serve` runs until stopped and `make test` is this test suite; "
    "tests/test_install_profiles.py checks what each installs",
    "docker build -t purgatory .": "needs a Docker engine, which the test machines lack; "
    "tests/test_install_profiles.py lints the Dockerfile",
    "make cluster   #": "`make cluster` runs until Ctrl-C; tests/cluster/test_make_cluster.py "
    "starts the same module and registers a watch on `orders` through the second server",
}


def _block(marker: str) -> str:
    [block] = [body for _, body in FENCED if marker in body]
    return str(block)


def _lines(block: str) -> list[str]:
    """The block's commands: comments dropped, continuation lines joined."""
    joined = block.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        command = line.split("  #")[0].strip()
        if command and not command.startswith("#"):
            out.append(command.replace(".venv/bin/", BIN))
    return out


def _bash(command: str, env: dict[str, str], timeout: float = 60) -> str:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{command!r} exited {done.returncode}: {done.stderr}"
    return done.stdout


def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.fixture
def server() -> Iterator[ServerThread]:
    with ServerThread(ServerConfig(listen="127.0.0.1:0", grace_s=0.5)) as st:
        yield st


def test_every_block_is_run_or_explained() -> None:
    for lang, body in FENCED:
        run = [m for m in RUN if m in body]
        skipped = [m for m in NOT_RUN if m in body]
        assert len(run) + len(skipped) == 1, f"README block not run nor explained:\n{body}"
        assert lang in ("python", "sh"), lang
    for marker in (*RUN, *NOT_RUN):
        _block(marker)  # each marker names exactly one block
    assert set(RUN.values()) <= set(globals())


def test_engine_example_runs() -> None:
    exec(compile(_block("DelayedOperationPurgatory"), "README.md", "exec"), {})


def test_client_example_runs_against_a_real_server(server: ServerThread) -> None:
    code = _block("Condition.all_keys()").replace('"127.0.0.1:50051"', repr(server.target))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().strip() == "COMPLETED"


def test_many_operations_example_runs_against_a_real_server(server: ServerThread) -> None:
    code = _block("watch_many").replace('"127.0.0.1:50051"', repr(server.target))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().split("\n")[:2] == ["ack-0 COMPLETED", "ack-1 EXPIRED"]


def test_cli_walkthrough_runs_line_by_line(server: ServerThread) -> None:
    watch, get, signal, subscribe = _lines(_block("purgatory watch order-42"))
    env = dict(os.environ, PURGATORY_TARGET=server.target)
    assert watch.endswith("&")
    # The backgrounded long-poll, as its own process; the next lines wait for it as a
    # user at a prompt would.
    waiter = subprocess.Popen(
        shlex.split(watch[:-1]), cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        with PurgatoryClient(server.target, timeout=5) as client:

            def registered() -> bool:
                try:
                    return client.get_operation("order-42").state is OperationState.WATCHING
                except PurgatoryError:
                    return False

            _until(registered)
        assert json.loads(_bash(get, env))["state"] == "WATCHING"
        assert json.loads(_bash(signal, env)) == {"completed": 1}
        out, _ = waiter.communicate(timeout=30)
        assert waiter.returncode == 0 and "COMPLETED" in out, out
        [event] = [json.loads(line) for line in _bash(subscribe, env).splitlines()]
        assert (event["operation_id"], event["state"]) == ("order-42", "COMPLETED")
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait(10)


def test_examples_block_runs(tmp_path: Path) -> None:
    serve, python_example, node_example = _lines(_block("examples/python/acks.py"))
    # `make serve &` is the server this test starts; the Node.js line runs in `make
    # node-test` (client/node/test/examples.test.mjs), with every other example.
    assert serve == "make serve &" and node_example.startswith("make node-build && node ")
    config = ServerConfig(listen="127.0.0.1:0", grace_s=0.5, data_dir=str(tmp_path))
    with ServerThread(config) as st:
        out = _bash(f"{python_example} {st.target}", dict(os.environ))
    assert "produce answered: COMPLETED" in out, out


def test_metrics_block_runs(tmp_path: Path) -> None:
    start, scrape = _lines(_block("--metrics-listen 127.0.0.1:9464"))
    # The README's ports, 0 instead: the server binds free ones and says which (the
    # metrics one in its log, the gRPC one in the harness's port file).
    command = shlex.split(start.replace("9464", "0"))
    with ServerProcess(tmp_path, command=command, cwd=tmp_path) as server:
        port = server.wait_log(r"metrics: http://127\.0\.0\.1:(\d+)/metrics")[1]
        done = subprocess.run(
            ["bash", "-c", scrape.replace("9464", port)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        assert done.returncode == 0, (done.stdout, done.stderr, server.log_text())
        assert "purgatory_operations_delayed" in done.stdout


def test_delayed_message_example_runs_against_a_real_server() -> None:
    code = _block("iter_operations")
    # The server's default limits (the test config caps timeouts at 10 minutes).
    with ServerThread(replace(TEST_CONFIG, limits=Limits())) as st:
        code = code.replace('"127.0.0.1:50051"', repr(st.target))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == ["order-42 45", "order-43 30"]
