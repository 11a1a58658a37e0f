"""``purgatory`` at a terminal, as a person types it (issue 25): each command runs as its
own process, installed as `make serve` installs it (no ``observability`` extra:
``tests/without_observability.py``), against a real server on 127.0.0.1:0.

Covered: the Ctrl-C hint names the same server and purgatory, even before the server
answered; a non-UTF-8 argument, a
negative count and an unknown ``batch`` field are one-line usage errors; a purgatory name
that none can have is INVALID_ARGUMENT whatever the command; ``--output table`` (ISO
times) and JSON with readable text; ``created`` only where a registration answers;
``--version`` on both binaries; shell completion; the hint when a plaintext client meets
a TLS server; the server's JSON log is JSON on every line, gRPC core's lines included.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_client import PurgatoryClient

from harness import ServerProcess
from tests.security.certs import CertFiles, make_certs
from tests.service.helpers import ServerThread

WITHOUT_EXTRA = [sys.executable, str(Path(__file__).parent / "without_observability.py")]
CLI = [*WITHOUT_EXTRA, "purgatory_client.cli"]


def _env(target: str = "127.0.0.1:1") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
    return {**env, "PURGATORY_TARGET": target}


def _cli(*args: str | bytes, target: str = "127.0.0.1:1", stdin: str = "") -> tuple[int, str, str]:
    done = subprocess.run(
        [*CLI, *args],
        input=stdin.encode(),
        capture_output=True,
        env=_env(target),
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread() as st:
        yield st


def _watching(args: list[str]) -> subprocess.Popen[str]:
    """``purgatory ARGS watch k`` started, waiting (a minute's timeout)."""
    return subprocess.Popen(
        [*CLI, *args, "watch", "k", "--timeout-ms", "60000"],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_hint_names_the_same_server_and_purgatory(server: ServerThread) -> None:
    with PurgatoryClient(server.target, timeout=5) as client:
        client.create_purgatory("hint-test")
    args = ["--target", server.target, "--purgatory", "hint-test"]
    waiter = _watching(args)
    try:
        with PurgatoryClient(server.target, purgatory="hint-test", timeout=5) as client:
            deadline = time.monotonic() + 30
            while not client.list_operations().operations:
                assert time.monotonic() < deadline, "the watch never registered"
                time.sleep(0.05)
            [op] = client.list_operations().operations
        waiter.send_signal(signal.SIGINT)
        _, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert waiter.returncode == 130
    get = f"purgatory {' '.join(args)} get {op.operation_id}"
    assert get in err, err
    # ... and that command works as printed.
    code, out, _ = _cli(*args, "get", op.operation_id)
    assert code == 0 and json.loads(out)["state"] == "WATCHING"


def test_ctrl_c_before_the_server_answers_still_names_the_operation() -> None:
    # A listener that takes the connection and the request and never answers: the watch
    # is interrupted inside its first (and only) call, as a Ctrl-C right after typing is.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(30)
        args = ["--target", f"127.0.0.1:{silent.getsockname()[1]}", "--purgatory", "p"]
        waiter = _watching(args)
        try:
            conn, _ = silent.accept()
            with conn:
                conn.settimeout(30)
                assert conn.recv(1), "the CLI sent nothing"
                waiter.send_signal(signal.SIGINT)
                _, err = waiter.communicate(timeout=30)
        finally:
            waiter.kill()
    assert waiter.returncode == 130
    [named] = re.findall(r"get (cli-[0-9a-f]{20})$", err, re.MULTILINE)
    assert f"watch k --timeout-ms 60000 --id {named}" in err, err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((b"get", b"caf\xe9"), "argument 2 (caf\\udce9) is not valid UTF-8"),
        (("ls", "--limit", "-1"), "argument --limit: must be at least 1, got -1"),
        (("ls", "--limit", "0"), "argument --limit: must be at least 1, got 0"),
        (("watch", "k", "--timeout-ms", "-1"), "argument --timeout-ms: must be at least 1"),
        (("subscribe", "--after", "-5"), "argument --after: must be at least 0, got -5"),
        (("batch", "watch", "--batch-size", "0"), "argument --batch-size: must be at least 1"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(
    args: tuple[str | bytes, ...], expected: str
) -> None:
    code, _, err = _cli(*args)
    assert code == 2 and expected in _one_line(err)


def test_batch_refuses_an_unknown_field_rather_than_making_up_an_id(
    server: ServerThread,
) -> None:
    line = '{"operation_id": "op-1", "keys": ["a"], "timeout_ms": 500}\n'
    code, out, err = _cli("batch", "watch", target=server.target, stdin=line)
    assert code == 2 and out == ""
    assert "line 1: unknown field 'operation_id' (known: id, keys" in _one_line(err)
    code, _, err = _cli("batch", "signal", target=server.target, stdin='{"kye": "a"}\n')
    assert code == 2 and "line 1: unknown field 'kye'" in _one_line(err)
    with PurgatoryClient(server.target, timeout=5) as client:
        assert not [o for o in client.iter_operations() if o.operation_id == "op-1"]


@pytest.mark.parametrize(
    "command", [("get", "x"), ("ls",), ("signal", "k"), ("purgatories", "get", "bad name!")]
)
def test_a_name_no_purgatory_can_have_is_invalid_everywhere(
    server: ServerThread, command: tuple[str, ...]
) -> None:
    code, _, err = _cli("--purgatory", "bad name!", *command, target=server.target)
    assert code == 1
    assert "INVALID_ARGUMENT" in _one_line(err) and "letters, digits" in err
    code, _, err = _cli("--purgatory", "no-such-one", "get", "x", target=server.target)
    assert code == 1 and "NOT_FOUND: purgatory 'no-such-one' not found" in _one_line(err)


def test_output_table_has_iso_times_and_json_stays_for_scripts(server: ServerThread) -> None:
    op_id = "commande-été-42"
    code, out, _ = _cli(
        "watch", "--timeout-ms", "600000", "--id", op_id, "--no-wait", target=server.target
    )
    assert code == 0 and json.loads(out)["created"] is True  # a registration says it
    assert op_id in out  # readable, not \\u-escaped
    code, out, _ = _cli("get", op_id, target=server.target)
    record = json.loads(out)
    assert code == 0 and "created" not in record and isinstance(record["due_time_ms"], int)
    code, out, _ = _cli("ls", "--prefix", "commande-", target=server.target)
    assert code == 0 and "created" not in json.loads(out)
    code, out, _ = _cli("--output", "table", "ls", "--prefix", "commande-", target=server.target)
    header, row = out.splitlines()
    assert header.split()[:2] == ["operation_id", "state"] and "created" not in header
    assert "due_time" in header.split() and "due_time_ms" not in header
    assert row.startswith(f"{op_id}  WATCHING")
    assert re.search(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b", row), row


def test_version_on_both_binaries() -> None:
    code, out, _ = _cli("--version")
    assert code == 0 and re.fullmatch(r"purgatory \d+\.\d+\.\d+\S*\n", out), out
    done = subprocess.run(
        [*WITHOUT_EXTRA, "purgatory_server", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and re.fullmatch(
        r"purgatory-server \d+\.\d+\.\d+\S*\n", done.stdout
    )


def test_bash_completion_completes_commands_and_their_options(tmp_path: Path) -> None:
    code, script, _ = _cli("completion", "bash")
    assert code == 0
    (tmp_path / "purgatory.bash").write_text(script)
    probe = f"""
source {tmp_path / "purgatory.bash"}
COMP_WORDS=(purgatory pur); COMP_CWORD=1; _purgatory; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(purgatory --target h:1 ls --li); COMP_CWORD=4; _purgatory; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(purgatory --output tab); COMP_CWORD=2; _purgatory; echo "${{COMPREPLY[*]}}"
"""
    done = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout.splitlines() == ["purgatories", "--limit", ""], done.stderr


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_plaintext_client_against_tls_server_gets_a_hint_and_the_log_stays_json(
    tmp_path: Path, certs: CertFiles
) -> None:
    args = ["--log-format", "json", "--data-dir", str(tmp_path / "data")]
    args += ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)]
    with ServerProcess(tmp_path, args, command=[*WITHOUT_EXTRA, "purgatory_server"]) as server:
        code, _, err = _cli("purgatories", target=server.address)
        assert code == 1
        assert "Socket closed (does the server serve TLS? then pass --tls-ca" in _one_line(err)
        code, out, _ = _cli("--tls-ca", str(certs.ca), "health", target=server.address)
        assert code == 0 and json.loads(out) == {"status": "SERVING"}
        server.wait_log("Handshake failed")
    assert server.stop() == 0
    lines = server.log_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line, gRPC core's too
    [core] = [r for r in records if "Handshake failed" in r["message"]]
    assert core["logger"] == "grpc" and core["level"] == "INFO"
    assert re.search(r"\(ssl_transport_security\.cc:\d+\)$", core["message"])


def test_help_text_has_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    # Docstring markup (``code``, `code`) reads as noise in a terminal.
    from purgatory_client._cli_completion import _subparsers
    from purgatory_client.cli import build_parser

    parser = build_parser()
    helps = [parser.format_help()]
    for child in _subparsers(parser).values():
        helps.append(child.format_help())
        helps += [grandchild.format_help() for grandchild in _subparsers(child).values()]
    assert len(helps) > 15
    server = subprocess.run(
        [*WITHOUT_EXTRA, "purgatory_server", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for text in (*helps, server.stdout):
        assert "`" not in text, text
