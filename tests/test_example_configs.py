"""The sample configuration files under examples/config load, and a server starts from
each (the durable one with its data directory under a temporary path)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from purgatory_client import PurgatoryClient
from purgatory_server._service.config.server_config import load_config

from tests.service.helpers import ServerThread

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "config"


def test_every_sample_config_is_tested() -> None:
    assert sorted(p.name for p in CONFIGS.glob("*.toml")) == ["durable.toml", "in-memory.toml"]


@pytest.mark.parametrize(
    ("name", "purgatories", "durable"),
    [("in-memory.toml", ["default"], False), ("durable.toml", ["acks", "orders"], True)],
)
def test_sample_config_loads_and_serves(
    name: str, purgatories: list[str], durable: bool, tmp_path: Path
) -> None:
    config = load_config(CONFIGS / name, env={})
    config.validate()
    assert all(p.durable is durable for p in config.purgatories)
    # Same file, but on a free port and (for the durable one) a temporary data directory.
    config = dataclasses.replace(config, listen="127.0.0.1:0", data_dir=str(tmp_path))
    with ServerThread(config) as st, PurgatoryClient(st.target) as client:
        infos = client.list_purgatories()
        assert sorted(p.name for p in infos) == purgatories
        assert all(p.config.durable is durable for p in infos)
