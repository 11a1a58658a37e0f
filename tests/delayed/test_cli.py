"""``purgatory cancel`` and ``purgatory reschedule`` against a real server."""

from __future__ import annotations

import json

import pytest
from purgatory_client.cli import main

from tests.service.helpers import ServerThread


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line]


def test_cancel_and_reschedule_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread() as st:
        t = ("--target", st.target)
        for op_id, key in (("order-1", "cart:1"), ("order-2", "cart:2"), ("x", "cart:3")):
            code, _ = _run(
                capsys, *t, "watch", key, "--timeout-ms", "60000", "--id", op_id, "--no-wait"
            )
            assert code == 0
        code, out = _run(capsys, *t, "reschedule", "order-1", "--timeout-ms", "600000")
        assert code == 0 and out[0]["state"] == "WATCHING"
        code, out = _run(capsys, *t, "reschedule", "order-1", "--due-time-ms", "1")
        assert code == 0 and out[0]["due_time_ms"] == 1
        code, out = _run(capsys, *t, "cancel", "--prefix", "order-")
        assert code == 0
        ended = out[0]["cancelled"]
        assert isinstance(ended, list)
        # order-1 was moved into the past above, so it may have expired already.
        assert {e["operation_id"] for e in ended} <= {"order-1", "order-2"}
        assert "order-2" in {e["operation_id"] for e in ended}
        assert all(e["state"] == "CANCELLED" for e in ended)
        code, out = _run(capsys, *t, "cancel", "x", "nope")
        assert code == 0 and [e["operation_id"] for e in out[0]["cancelled"]] == ["x"]
        code, out = _run(capsys, *t, "cancel", "--key", "cart:3")
        assert code == 0 and out[0]["cancelled"] == []
        assert _run(capsys, *t, "cancel")[0] == 2
        assert main([*t, "reschedule", "x", "--timeout-ms", "1000"]) == 1
        assert "has already ended" in capsys.readouterr().err
