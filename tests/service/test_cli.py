"""The ``purgatory`` command line against a real server."""

from __future__ import annotations

import io
import json

import pytest
from purgatory_client import Condition
from purgatory_client.cli import main, parse_condition

from tests.service.helpers import ServerThread


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line]


def test_watch_signal_force_subscribe_purgatories(
    server_thread: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    t = ["--target", server_thread.target]
    code, out = _run(capsys, *t, "watch", "k", "--timeout-ms", "60000", "--id", "w1", "--no-wait")
    assert code == 0 and out[0]["state"] == "WATCHING"
    code, out = _run(capsys, *t, "signal", "k", "--amount", "3", "--source", "r1")
    assert (code, out) == (0, [{"completed": 1}])
    _run(capsys, *t, "watch", "--timeout-ms", "60000", "--id", "w2", "--no-wait")
    code, out = _run(capsys, *t, "force", "w2")
    assert out[0]["completed"] is True
    assert out[0]["operation"]["state"] == "FORCE_COMPLETED"
    code, out = _run(capsys, *t, "subscribe", "--after", "0", "--limit", "2")
    assert [e["operation_id"] for e in out] == ["w1", "w2"]
    assert out[0]["result"]["amount_sum"] == 3
    code, out = _run(capsys, *t, "purgatories", "create", "other")
    assert out[0]["name"] == "other"
    code, out = _run(capsys, *t, "purgatories")
    assert [p["name"] for p in out] == ["default", "other"]
    code, out = _run(capsys, *t, "health")
    assert (code, out) == (0, [{"status": "SERVING"}])


def test_watch_waits_for_the_outcome(
    server_thread: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    t = ["--target", server_thread.target]
    code, out = _run(capsys, *t, "watch", "k", "--timeout-ms", "50", "--condition", "min:2")
    assert code == 0
    assert out[0]["state"] == "EXPIRED"


def test_errors_exit_non_zero(
    server_thread: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--target", server_thread.target, "--purgatory", "nope", "signal", "k"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    assert main(["--target", server_thread.target, "purgatories", "get"]) == 2


def test_condition_syntax() -> None:
    assert parse_condition("min-distinct:3") == Condition.min_signals(3, distinct_sources=True)
    assert parse_condition("sum:10") == Condition.sum_at_least(10)
    assert parse_condition("values:7").default_target == 7
    with pytest.raises(Exception, match="bad condition"):
        parse_condition("sometimes")


def test_batch_modes_read_stdin(
    server_thread: ServerThread,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = ["--target", server_thread.target]

    def stdin(text: str) -> None:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))

    # Watches: outcomes as JSON lines, in the order they end.
    stdin('b1 ka\n\n# a comment\n{"id": "b2", "keys": ["kb"], "timeout_ms": 30}\n')
    code, out = _run(capsys, *t, "batch", "watch", "--timeout-ms", "400")
    assert code == 0
    assert [(e["operation_id"], e["state"]) for e in out] == [("b2", "EXPIRED"), ("b1", "EXPIRED")]
    # Signals: through the batching dispatcher, one summary line.
    for i in range(10):
        _run(capsys, *t, "watch", f"s{i}", "--timeout-ms", "60000", "--id", f"s{i}", "--no-wait")
    stdin("".join(f"s{i}\n" for i in range(9)) + '{"key": "s9", "amount": 2}\nnobody\n')
    code, out = _run(capsys, *t, "batch", "signal", "--batch-size", "4")
    assert code == 0
    assert out[0]["signals"] == 11 and out[0]["completed"] == 10 and out[0]["failed"] == 0
    assert out[0]["batches"] >= 3
    # A malformed line: exit 2, naming it, and nothing sent.
    stdin("ok\nnot one key\n")
    assert main([*t, "batch", "signal"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_watch_if_and_match(
    server_thread: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    t = ["--target", server_thread.target]
    watch = [*t, "watch", "paid", "--timeout-ms", "60000", "--no-wait"]
    code, out = _run(
        capsys,
        *watch,
        "--id",
        "inv-42",
        "--match",
        "invoice_id",
        "--if",
        "signal.attributes.approved",
        "--attributes",
        '{"invoice_id": 42}',
    )
    assert (code, out[0]["state"]) == (0, "WATCHING")
    code, out = _run(capsys, *t, "signal", "paid", "--attributes", '{"invoice_id": 41}')
    assert out == [{"completed": 0}]
    unapproved = '{"invoice_id": 42, "approved": false}'
    code, out = _run(capsys, *t, "signal", "paid", "--attributes", unapproved)
    assert out == [{"completed": 0}]
    approved = '{"invoice_id": 42, "approved": true}'
    code, out = _run(capsys, *t, "signal", "paid", "--attributes", approved)
    assert out == [{"completed": 1}]
    code, out = _run(capsys, *t, "get", "inv-42")
    assert out[0]["result"]["matched_attributes"] == {"invoice_id": 42, "approved": True}
    # A syntax error is refused at registration, naming the position.
    assert main([*watch, "--if", "signal.attributes.x &&"]) == 1
    assert "condition.filter: syntax error at 1:23" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*watch, "--attributes", "[1]"])
    assert exited.value.code == 2
    assert "not a JSON object" in capsys.readouterr().err
