"""The CLI's user-facing details: bytes printed unambiguously, an interrupted watch that
says how to wait again, help text on every option, subscribe's resume options."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from purgatory_client import PurgatoryClient, ResumePolicy
from purgatory_client.cli import build_parser, main
from purgatory_server._service import ServerConfig

from tests.service.helpers import ServerThread


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = str(tmp_path_factory.mktemp("data"))  # never the checkout's ./data
    with ServerThread(ServerConfig(listen="127.0.0.1:0", grace_s=0.5, data_dir=data)) as st:
        yield st.target


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]


def test_bytes_print_as_base64_by_default_and_utf8_with_text(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t = ["--target", target]
    watch = ["watch", "bk", "--timeout-ms", "60000", "--id", "b1", "--payload", "é\\x"]
    assert main([*t, *watch, "--no-wait"]) == 0
    assert main([*t, "signal", "bk", "--data", "dätä"]) == 0
    capsys.readouterr()
    assert main([*t, "get", "b1"]) == 0
    (shown,) = _lines(capsys)
    assert base64.b64decode(shown["payload"]) == "é\\x".encode()
    assert base64.b64decode(shown["result"]["data"]) == "dätä".encode()
    assert main([*t, "--text", "get", "b1"]) == 0
    (shown,) = _lines(capsys)
    assert (shown["payload"], shown["result"]["data"]) == ("é\\x", "dätä")


def test_a_waiting_watch_without_id_reports_that_it_created_the_operation(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # It registers first (to learn the id), then waits by re-sending that id; the
    # answer still says this command created the operation.
    t = ["--target", target]
    signaller = threading.Timer(0.5, lambda: main([*t, "signal", "ck"]))
    signaller.start()
    try:
        assert main([*t, "watch", "ck", "--timeout-ms", "60000"]) == 0
    finally:
        signaller.join(10)
    watched = [line for line in _lines(capsys) if "operation_id" in line]
    assert [(w["state"], w["created"]) for w in watched] == [("COMPLETED", True)]


def test_interrupted_watch_says_it_is_pending_and_how_to_wait_again(
    target: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PurgatoryClient.try_complete_else_watch

    def interrupted(self: PurgatoryClient, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("wait"):  # registered, then Ctrl-C while the long-poll blocks
            real(self, *args, **{**kwargs, "wait": False})
            os.kill(os.getpid(), signal.SIGINT)  # to the process: its main thread takes it
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PurgatoryClient, "try_complete_else_watch", interrupted)
    argv = ["--target", target, "watch", "ik", "--timeout-ms", "60000"]
    # As at a terminal, even when this run inherited SIGINT ignored (a background job).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(argv) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert "stays pending on the server" in err
    again = err.split("Wait on it again with:\n  purgatory ", 1)[1].splitlines()[0]
    op_id = again.rsplit("--id ", 1)[1]
    monkeypatch.setattr(PurgatoryClient, "try_complete_else_watch", real)
    # The printed id names the registered, still watching operation.
    assert main(["--target", target, "get", op_id]) == 0
    assert _lines(capsys)[0]["state"] == "WATCHING"


def _options(parser: Any) -> Iterator[tuple[str, Any]]:
    for action in parser._actions:
        if action.dest == "help":
            continue
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict):  # subcommands
            for name, sub in choices.items():
                yield from ((f"{name} {n}", a) for n, a in _options(sub))
        else:
            yield action.dest, action


def test_every_option_has_help_and_every_command_an_example() -> None:
    parser = build_parser()
    missing = [name for name, action in _options(parser) if not action.help]
    assert missing == []
    commands = next(a for a in parser._actions if isinstance(a.choices, dict)).choices
    no_example = [
        name
        for name, sub in commands.items()
        if name != "health" and "example" not in (sub.epilog or "")
    ]
    assert no_example == []
    assert "min-distinct:N" in commands["watch"].format_help()
    assert "--after 0" in commands["subscribe"].format_help()


def test_resume_policy_attempts_cap_and_forever() -> None:
    policy = ResumePolicy(attempts=2, initial_delay_s=0.5, max_delay_s=1.5)
    assert [policy.delay_s(n) for n in range(3)] == [0.5, 1.0, 1.5]
    assert (policy.exhausted(1), policy.exhausted(2)) == (False, True)
    forever = ResumePolicy.forever(max_delay_s=3.0)
    assert not forever.exhausted(10**6) and forever.delay_s(10**6) == 3.0
    args = build_parser().parse_args(["subscribe", "--forever", "--resume-max-delay", "5"])
    assert (args.forever, args.resume_max_delay) == (True, 5.0)


def test_a_table_of_a_complete_list_fits_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    from purgatory_client._cli_output import Printer

    # The first row's cells are the narrowest (as a --workers 2 listing can come).
    rows = [{"name": "a", "config": {"durable": True}}, {"name": "default", "config": {}}]
    rows.append({"name": "bb", "config": {"durable": False, "max_pending": 10}})
    Printer("table").all(rows)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert {line.index(line.split()[1]) for line in lines} == {len("default") + 2}


def test_purgatories_as_a_table_line_up(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    t = ["--target", target]
    # aa-table sorts first and its row is the narrowest ("durable":true, not false).
    assert main([*t, "--output", "table", "purgatories", "create", "aa-table", "--durable"]) == 0
    with PurgatoryClient(target) as client:
        client.create_purgatory("zz-table")
    try:
        capsys.readouterr()
        assert main([*t, "--output", "table", "purgatories"]) == 0
        lines = capsys.readouterr().out.splitlines()
        header, rows = lines[0], lines[1:]
        assert len(rows) >= 3
        for column in header.split()[1:]:
            starts = {row[header.index(column) - 2 : header.index(column)] for row in rows}
            assert starts == {"  "}, (column, lines)  # every cell starts under its header
    finally:
        with PurgatoryClient(target) as client:
            client.delete_purgatory("aa-table")
            client.delete_purgatory("zz-table")
