"""``purgatory subscribe --group``, ``purgatory ack`` and ``purgatory group ...`` against
a real server."""

from __future__ import annotations

import json
import time

import pytest
from purgatory_client import PurgatoryClient
from purgatory_client.cli import main

from tests.service.helpers import ServerThread


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line]


def test_group_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread() as st:
        t = ("--target", st.target)
        with PurgatoryClient(st.target) as client:
            # Create the group (it keeps collecting outcomes once its member has left).
            client.join_group("billing", visibility_timeout_ms=200, max_attempts=1).close()
        for op_id in ("order-1", "order-2"):
            code, _ = _run(capsys, *t, "watch", "--timeout-ms", "5", "--id", op_id, "--no-wait")
            assert code == 0
        code, out = _run(capsys, *t, "subscribe", "--group", "billing", "--limit", "2")
        assert code == 0
        assert [(d["operation_id"], d["attempt"]) for d in out] == [
            ("order-1", 1),
            ("order-2", 1),
        ]
        assert all(d["group"] == "billing" and d["state"] == "EXPIRED" for d in out)
        first, second = out
        code, acked = _run(capsys, *t, "ack", "billing", str(first["sequence"]), "--attempt", "1")
        assert code == 0 and acked == [{"acked": first["sequence"]}]
        # order-2 is never acked: one attempt allowed, so its lease's end dead-letters it.
        deadline = time.monotonic() + 10
        while True:
            code, dead = _run(capsys, *t, "group", "dead-letters", "billing")
            if dead or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [(d["operation_id"], d["attempt"], d["dead_letter"]) for d in dead] == [
            ("order-2", 1, True)
        ]
        code, out = _run(capsys, *t, "group", "redrive", "billing")
        assert code == 0 and out == [{"redriven": [second["sequence"]]}]
        code, out = _run(capsys, *t, "subscribe", "--group", "billing", "--ack", "--limit", "1")
        assert code == 0 and [(d["operation_id"], d["attempt"]) for d in out] == [("order-2", 2)]
        # order-3 is dead-lettered too, then discarded: gone for good.
        code, _ = _run(capsys, *t, "watch", "--timeout-ms", "5", "--id", "order-3", "--no-wait")
        code, out = _run(capsys, *t, "subscribe", "--group", "billing", "--limit", "1")
        assert code == 0 and [d["operation_id"] for d in out] == ["order-3"]
        third = out[0]["sequence"]
        deadline = time.monotonic() + 10
        while not _run(capsys, *t, "group", "dead-letters", "billing")[1]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert main([*t, "group", "discard", "billing"]) == 2  # neither SEQ nor --all
        assert "SEQ... or --all" in capsys.readouterr().err
        code, out = _run(capsys, *t, "group", "discard", "billing", "--all")
        assert code == 0 and out == [{"discarded": [third]}]
        code, out = _run(capsys, *t, "group", "list")
        assert code == 0
        assert [(g["name"], g["ready"], g["leased"], g["dead_letters"]) for g in out] == [
            ("billing", 0, 0, 0)
        ]
        code, out = _run(capsys, *t, "group", "delete", "billing")
        assert code == 0 and out == [{"dropped": 0}]
        assert main([*t, "ack", "billing", "1"]) == 1
        assert "not found" in capsys.readouterr().err
        assert main([*t, "group", "redrive"]) == 2
