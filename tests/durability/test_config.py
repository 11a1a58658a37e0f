"""Durability options: TOML, environment, validation, and what the journal gets."""

from __future__ import annotations

from pathlib import Path

import pytest
from purgatory_server._journal import FsyncPolicy
from purgatory_server._service.config.server_config import (
    ConfigError,
    PurgatorySettings,
    load_config,
)
from purgatory_server._service.durable.catalog import read_catalog, write_settings
from purgatory_server._service.durable.local_store import journal_config


def test_toml_and_environment_set_durability(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text(
        'data_dir = "/srv/p"\nfsync = "interval"\n'
        '[[purgatories]]\nname = "orders"\ndurable = true\nfsync = "always"\n'
        '[[purgatories]]\nname = "fetch"\n'
    )
    config = load_config(path, env={"PURGATORY_FSYNC_INTERVAL_MS": "25"})
    orders, fetch = config.purgatories
    assert (config.data_dir, config.fsync, config.fsync_interval_ms) == ("/srv/p", "interval", 25)
    assert (orders.durable, fetch.durable) == (True, False)
    per_purgatory = journal_config(config, orders)
    assert (per_purgatory.fsync, per_purgatory.fsync_interval_ms) == (FsyncPolicy.ALWAYS, 25)
    assert journal_config(config, fetch).fsync is FsyncPolicy.INTERVAL


def test_environment_booleans_and_bad_values() -> None:
    config = load_config(
        env={"PURGATORY_DEFAULTS_DURABLE": "true", "PURGATORY_REPAIR_JOURNAL": "1"}
    )
    assert config.defaults.durable and config.purgatories[0].durable and config.repair_journal
    with pytest.raises(ConfigError, match="fsync"):
        load_config(env={"PURGATORY_FSYNC": "sometimes"})
    with pytest.raises(ConfigError, match="durable"):
        load_config(env={"PURGATORY_DEFAULTS_DURABLE": "perhaps"})


def test_catalog_round_trip_and_rejects_foreign_settings(tmp_path: Path) -> None:
    settings = PurgatorySettings(name="orders", durable=True, fsync="never", max_pending=7)
    write_settings(tmp_path, settings)
    assert read_catalog(tmp_path) == [settings]
    (tmp_path / "orders" / "purgatory.json").write_text('{"name": "other"}')
    with pytest.raises(ConfigError, match="orders"):
        read_catalog(tmp_path)
