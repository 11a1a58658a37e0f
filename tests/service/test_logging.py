"""The server's log: one line per lifecycle event, JSON on request, bounded warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from purgatory_client import InvalidArgumentError, PurgatoryClient
from purgatory_server._service.config.logs import RateLimit
from purgatory_server._service.config.server_config import ConfigError, ServerConfig

from harness import ServerProcess


def test_json_log_has_lifecycle_and_rejection_lines(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--log-format", "json", "--log-level", "INFO"]
    server = ServerProcess(tmp_path, [*args, "--grace", "0.5"])
    with server, PurgatoryClient(server.address, timeout=10) as client:
        client.create_purgatory("logged")
        client.delete_purgatory("logged")
        with pytest.raises(InvalidArgumentError):
            client.try_complete_else_watch(["k"], 0, purgatory="default")
    err = server.log_text()
    entries = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in entries)
    messages = [(e["level"], e["message"]) for e in entries]
    assert any(m.startswith("purgatory logged created (in memory") for _, m in messages)
    assert ("INFO", "purgatory logged deleted: 0 pending operations cancelled") in messages
    rejected = [m for level, m in messages if level == "WARNING" and "rejected" in m]
    assert rejected and rejected[0].startswith("request rejected: INVALID_ARGUMENT: ")


def test_rate_limit_counts_what_it_drops() -> None:
    now = [100.0]
    limit = RateLimit(per_second=2, clock=lambda: now[0])
    assert [limit.admit() for _ in range(5)] == [0, 0, None, None, None]
    now[0] = 101.2
    assert limit.admit() == 3  # the next line that gets through reports the three dropped
    assert limit.admit() == 0


def test_bad_log_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="log_format"):
        ServerConfig(log_format="xml").validate()
    with pytest.raises(ConfigError, match="log_level"):
        ServerConfig(log_level="LOUD").validate()


async def test_a_slow_subscriber_cut_off_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    from purgatory_server._service.model.conditions import EMPTY_RESULT
    from purgatory_server._service.model.operation_state import OperationState
    from purgatory_server._service.model.outcome import Outcome
    from purgatory_server._service.outcomes.subscriptions import MATCH_ALL, Subscriber

    subscriber = Subscriber(MATCH_ALL, 1, (), 0)
    with caplog.at_level("WARNING", logger="purgatory_server.service"):
        for seq in (1, 2, 3):
            outcome = Outcome(
                seq, "p", f"op{seq}", OperationState.COMPLETED, (), b"", EMPTY_RESULT, 0, 0, 0
            )
            subscriber.offer(outcome)
            if seq == 1:
                assert subscriber.pop() == outcome  # sent: the resume point is now 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("subscriber cut off: more than 1 events behind")
    assert "resume after sequence 1" in line
