"""The README's walk-through runs as written and IN ORDER, as a newcomer follows it.

Every fenced block of README.md is either run here or listed in ``NOT_RUN`` with the
reason; a new block that is neither fails :func:`test_every_block_is_run_or_explained`.
:func:`test_walkthrough_runs_in_order` starts ONE fresh server, as `make serve` does (the
server's default limits, the ``default`` purgatory, its own data directory), and runs
every block against it in the README's order: its Python executed, its shell lines run
one by one with bash. So a block that trips over what an earlier one left (an operation
id registered twice, a port taken twice) fails here as it would for a reader. Shell
lines reach the server through ``PURGATORY_TARGET`` (the CLI), a ``HOST:PORT`` argument
(the example scripts) or a free port put in place of the README's fixed one, and
``.venv/bin/`` is this interpreter's directory (the same virtual environment when run
by ``make test``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from purgatory_client import OperationState, PurgatoryClient, PurgatoryError
from purgatory_server._service import ServerConfig

from harness import ServerProcess
from harness.readme import ROOT, block, commands, fenced, readme_text
from tests.service.helpers import ServerThread

README = readme_text()
# (language, body) of every fenced block, in order (the parser .ci/readme_walkthrough.py
# uses too).
FENCED = fenced(README)
BIN = str(Path(sys.executable).parent) + "/"

# Blocks run by a test below, by a line that identifies them.
RUN = {
    "DelayedOperationPurgatory": "run_engine_example",
    "Condition.all_keys()": "run_client_example",
    "watch_many": "run_many_operations_example",
    "purgatory watch order-42": "run_cli_walkthrough",
    "examples/python/acks.py": "run_examples_block",
    "--metrics-listen 127.0.0.1:9464": "run_metrics_block",
    "iter_operations": "run_delayed_message_example",
}
# Blocks no test can run, and why.
NOT_RUN = {
    "make serve   #": "`make serve` runs until stopped and `make test` is this test suite; "
    "tests/test_install_profiles.py checks what each installs",
    "docker build -t purgatory .": "needs a Docker engine, which the test machines lack; "
    "tests/test_install_profiles.py lints the Dockerfile",
    "make cluster CLUSTER_PORT": "`make cluster` runs until Ctrl-C; "
    "tests/cluster/test_make_cluster.py starts the same module and registers a watch on "
    "`orders` through the second server; tests/test_install_profiles.py checks "
    "CLUSTER_PORT",
}


def _block(marker: str) -> str:
    return block(FENCED, marker)


def _lines(body: str) -> list[str]:
    """The block's commands: comments dropped, continuation lines joined."""
    return commands(body, BIN)


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


def test_every_block_is_run_or_explained() -> None:
    for lang, body in FENCED:
        run = [m for m in RUN if m in body]
        skipped = [m for m in NOT_RUN if m in body]
        assert len(run) + len(skipped) == 1, f"README block not run nor explained:\n{body}"
        assert lang in ("python", "sh"), lang
    for marker in (*RUN, *NOT_RUN):
        _block(marker)  # each marker names exactly one block
    assert set(RUN.values()) <= set(globals())


def _exec(code: str, target: str) -> str:
    """Run a Python block against ``target``; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.replace('"127.0.0.1:50051"', repr(target)), "README.md", "exec"), {})
    return out.getvalue()


def run_engine_example(block: str, st: ServerThread, tmp_path: Path) -> None:
    exec(compile(block, "README.md", "exec"), {})


def run_client_example(block: str, st: ServerThread, tmp_path: Path) -> None:
    assert _exec(block, st.target).strip() == "COMPLETED"


def run_many_operations_example(block: str, st: ServerThread, tmp_path: Path) -> None:
    assert _exec(block, st.target).split("\n")[:2] == ["ack-0 COMPLETED", "ack-1 EXPIRED"]


def run_delayed_message_example(block: str, st: ServerThread, tmp_path: Path) -> None:
    assert _exec(block, st.target).splitlines() == ["unpaid-42 45", "unpaid-43 30"]


def run_cli_walkthrough(block: str, st: ServerThread, tmp_path: Path) -> None:
    watch, get, signal, subscribe, table = _lines(block)
    env = dict(os.environ, PURGATORY_TARGET=st.target)
    assert watch.endswith("&")
    # The backgrounded long-poll, as its own process; the next lines wait for it as a
    # user at a prompt would.
    waiter = subprocess.Popen(
        shlex.split(watch[:-1]), cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        with PurgatoryClient(st.target, timeout=5) as client:

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
        header, row = _bash(table, env).splitlines()
        assert header.startswith("operation_id") and row.split()[:2] == ["order-42", "COMPLETED"]
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait(10)


def run_examples_block(block: str, st: ServerThread, tmp_path: Path) -> None:
    python_example, node_example = _lines(block)
    # The Node.js line runs in `make node-test` (client/node/test/examples.test.mjs),
    # with every other example.
    assert node_example.startswith("make node-build && node ")
    out = _bash(f"{python_example} {st.target}", dict(os.environ))
    assert "produce answered: COMPLETED" in out, out


def run_metrics_block(block: str, st: ServerThread, tmp_path: Path) -> None:
    install, start, scrape = _lines(block)
    # `make install` made the virtual environment this test runs in.
    assert install == "make install" and start.endswith("&")
    # The README's ports, 0 instead: the server binds free ones and says which (the
    # metrics one in its log, the gRPC one in the harness's port file).
    command = shlex.split(start[:-1].replace("9464", "0").replace("--listen 127.0.0.1:50052", ""))
    with ServerProcess(tmp_path / "metrics", command=command) as server:
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
    assert "--listen 127.0.0.1:50052" in start  # beside make serve's 50051, not on it
    # and beside make serve's ./data, which holds the durable `orders` (journal locked) by
    # now: a second server there refuses to start (.ci/readme_walkthrough.py runs it so).
    assert "--data-dir data-2" in start


def test_walkthrough_runs_in_order(tmp_path: Path) -> None:
    # `make serve`: the server's defaults, with its data directory here.
    config = ServerConfig(listen="127.0.0.1:0", grace_s=0.5, data_dir=str(tmp_path / "data"))
    with ServerThread(config) as st:
        for _, body in FENCED:
            for marker, runner in RUN.items():
                if marker in body:
                    try:
                        globals()[runner](body, st, tmp_path)
                    except BaseException as exc:
                        raise AssertionError(f"README block {marker!r} failed in order") from exc


def test_ci_walkthrough_follows_the_readme() -> None:
    """.ci/readme_walkthrough.py (CI, before `make test`) finds every step where the README
    gives it: each fenced block, and its inline commands in their paragraphs, in order."""
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "readme_walkthrough.py"), "--list"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = done.stdout.splitlines()
    assert len([line for line in listed if not line.startswith("inline: ")]) == len(FENCED)
    # `purgatory purgatories create orders --durable` runs where "Durable purgatories" gives
    # it (after the client examples, before the cluster), not where the set-up section
    # names it as what CI runs.
    create = listed.index("inline: purgatory purgatories create orders --durable")
    first_python = next(i for i, line in enumerate(listed) if line.startswith("python: "))
    cluster = next(i for i, line in enumerate(listed) if line.startswith("sh: make cluster"))
    assert first_python < create < cluster, listed
