"""``purgatory schedule set|rm|ls`` against a real server."""

from __future__ import annotations

import json

import pytest
from purgatory_client.cli import main

from tests.service.helpers import ServerThread


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line]


def test_schedule_set_ls_rm(capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread() as st:
        t = ("--target", st.target, "--text")
        set_nightly = (
            *t,
            *("schedule", "set", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/Paris"),
            *("--key", "compaction-done", "--payload", "compact"),
        )
        code, out = _run(capsys, *set_nightly)
        assert code == 0
        (up,) = out
        assert (up["created"], up["changed"]) == (True, True)
        schedule = up["schedule"]
        assert isinstance(schedule, dict)
        assert schedule["next_operation_id"] == f"nightly@{schedule['next_fire_time_ms']}"
        assert (schedule["payload"], schedule["keys"]) == ("compact", ["compaction-done"])
        code, out = _run(capsys, *set_nightly)  # a second producer: nothing changes
        assert code == 0 and (out[0]["created"], out[0]["changed"]) == (False, False)
        code, out = _run(capsys, *t, "schedule", "set", "beat", "--every-ms", "86400000")
        assert code == 0
        code, out = _run(capsys, *t, "schedule", "ls")
        assert code == 0
        assert [(s["schedule_id"], s["every_ms"], s["cron"]) for s in out] == [
            ("beat", 86400000, ""),
            ("nightly", 0, "0 2 * * *"),
        ]
        code, out = _run(capsys, *t, "schedule", "rm", "beat")
        assert code == 0
        cancelled = out[0]["cancelled"]
        assert isinstance(cancelled, dict) and cancelled["state"] == "CANCELLED"
        assert main([*t, "schedule", "rm", "beat"]) == 1
        assert "schedule 'beat' not found" in capsys.readouterr().err
        assert main([*t, "schedule", "set", "x", "--cron", "0 9 * *"]) == 1
        assert "schedule.cron" in capsys.readouterr().err
        code, out = _run(capsys, *t, "schedule", "ls")
        assert [s["schedule_id"] for s in out] == ["nightly"]
