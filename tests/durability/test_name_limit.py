"""Lowering ``max_name_length`` below an existing durable purgatory's name stops start-up
with an error naming that purgatory (issue 44 point 5), instead of a bare field error."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service import create_server
from purgatory_server._service.config.server_config import ConfigError

from tests.durability.helpers import durable_config, running


async def test_a_name_longer_than_a_lowered_limit_is_named(tmp_path: Path) -> None:
    config = durable_config(tmp_path)
    async with running(config) as stub:
        await stub.CreatePurgatory(
            pb.CreatePurgatoryRequest(name="orders-eu", config=pb.PurgatoryConfig(durable=True))
        )
    lowered = replace(config, limits=replace(config.limits, max_name_length=5))
    with pytest.raises(ConfigError) as info:
        await create_server("127.0.0.1:0", lowered)
    message = str(info.value)
    assert "'orders-eu' (9 characters)" in message and "max_name_length (5)" in message
    assert (tmp_path / "orders-eu" / "purgatory.json").exists()  # nothing dropped
