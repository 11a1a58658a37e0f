"""A durable purgatory created by a user, through the Python client and through the CLI,
keeps its pending operations across a server restart (the server recovers it from its
catalog under the data directory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from purgatory_client import OperationState, PurgatoryClient, PurgatoryConfig
from purgatory_client.cli import main as cli
from purgatory_server._service import ServerConfig

from tests.service.helpers import ServerThread

LONG = 600_000


def _config(data_dir: Path) -> ServerConfig:
    return ServerConfig(listen="127.0.0.1:0", grace_s=0.5, data_dir=str(data_dir))


def test_durable_purgatories_created_by_client_and_cli_survive_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ServerThread(_config(tmp_path)) as st:
        with PurgatoryClient(st.target) as client:
            info = client.create_purgatory("by-client", PurgatoryConfig(durable=True))
            assert info.config.durable
        assert cli(["--target", st.target, "purgatories", "create", "by-cli", "--durable"]) == 0
        created = json.loads(capsys.readouterr().out)
        assert created["name"] == "by-cli" and created["config"]["durable"] is True
        assert cli(["--target", st.target, "purgatories", "create", "volatile"]) == 0
        assert json.loads(capsys.readouterr().out)["config"]["durable"] is False
        with PurgatoryClient(st.target) as client:
            for name in ("by-client", "volatile"):
                client.try_complete_else_watch(
                    ["k"], LONG, operation_id=f"{name}-op", purgatory=name, wait=False
                )
        # The CLI registers its purgatory's pending operation itself.
        watch = ["watch", "k", "--id", "by-cli-op", "--timeout-ms", str(LONG), "--no-wait"]
        assert cli(["--target", st.target, "--purgatory", "by-cli", *watch]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "WATCHING"

    with ServerThread(_config(tmp_path)) as st:
        with PurgatoryClient(st.target) as client:
            names = {p.name for p in client.list_purgatories()}
            assert {"by-client", "by-cli"} <= names and "volatile" not in names
            for name in ("by-client", "by-cli"):
                assert client.get_purgatory(name).pending == 1
                status = client.get_operation(f"{name}-op", purgatory=name)
                assert status.state is OperationState.WATCHING
        # The CLI reads one operation of a recovered purgatory too.
        assert cli(["--target", st.target, "--purgatory", "by-cli", "get", "by-cli-op"]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "WATCHING"


def test_a_watching_operation_shows_its_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from purgatory_client import Condition, Signal

    with ServerThread(_config(tmp_path)) as st:
        with PurgatoryClient(st.target) as client:
            client.try_complete_else_watch(
                ["acks"],
                LONG,
                condition=Condition.min_signals(2, distinct_sources=True),
                operation_id="produce-1",
            )
            assert client.check_and_complete("acks", Signal(amount=3, source="b1")) == 0
            status = client.get_operation("produce-1")
            assert status.state is OperationState.WATCHING
            assert (status.result.signal_count, status.result.sources) == (1, ("b1",))
            assert status.result.amount_sum == 3
            assert status.result.signalled_keys == ("acks",)
        assert cli(["--target", st.target, "get", "produce-1"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["state"] == "WATCHING" and shown["result"]["signal_count"] == 1
