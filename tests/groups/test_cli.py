"""``purgatory subscribe --group``, ``purgatory ack`` and ``purgatory group ...`` against
a real server."""

from __future__ import annotations

import json
import threading
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


def test_subscribe_creates_a_group_with_a_selection(capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread() as st, PurgatoryClient(st.target) as client:
        t = ("--target", st.target)

        def until_ready(n: int) -> None:
            deadline = time.monotonic() + 10
            while not (groups := client.list_groups()) or groups[0].ready + groups[0].leased < n:
                assert time.monotonic() < deadline
                time.sleep(0.02)

        create = ["subscribe", "--group", "sel", "--ack", "--limit", "1"]
        create += ["--priority", "urgent/=7", "--priority-key", "vip=3", "--ordering-key", "/"]
        create += ["--rate-limit", "50/1000", "--rate-limit-per-key", "first-key"]
        member = threading.Thread(target=main, args=([*t, *create],))
        member.start()
        until_ready(0)  # the CLI's member created the group
        client.try_complete_else_watch([], 5, operation_id="first")
        member.join(10)
        assert not member.is_alive()
        code, out = _run(capsys, *t, "group", "list")
        assert [d["operation_id"] for d in out if "operation_id" in d] == ["first"]
        (group,) = [g for g in out if "name" in g]
        assert code == 0 and group["selection"] == {
            "priorities": [
                {"priority": 7, "operation_id_prefix": "urgent/", "key": ""},
                {"priority": 3, "operation_id_prefix": "", "key": "vip"},
            ],
            "ordering_key": {"separator": "/"},
            "rate_limit": {"max": 50, "window_ms": 1000, "per_key": {}},
        }
        for op_id in ("plain", "urgent/1"):
            client.try_complete_else_watch([], 5, operation_id=op_id)
        until_ready(2)
        code, out = _run(capsys, *t, "subscribe", "--group", "sel", "--ack", "--limit", "2")
        assert [(d["operation_id"], d["priority"]) for d in out] == [("urgent/1", 7), ("plain", 0)]
        assert main([*t, "subscribe", "--group", "x", "--rate-limit-per-key", "/"]) == 2
        assert "needs --rate-limit" in capsys.readouterr().err
