"""A durable purgatory whose data directory fails at start-up (issue 44): the server
starts, serves the others, answers UNAVAILABLE for it naming the error with RetryInfo,
and opens it once the directory works, without a restart. No root needed: a file where
the data directory must be makes the OSError."""

from __future__ import annotations

from pathlib import Path

import pytest
from purgatory_client import AsyncPurgatoryClient, UnavailableError
from purgatory_server._service import ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.service.helpers import until


async def test_an_unopenable_purgatory_is_unavailable_then_opened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("a file where the data directory goes")
    config = ServerConfig(
        listen="127.0.0.1:0",
        grace_s=0.5,
        data_dir=str(data),
        purgatories=(
            PurgatorySettings(name="d", durable=True, retained_events=10),
            PurgatorySettings(name="mem", retained_events=10),
        ),
    )
    server, port = await create_server("127.0.0.1:0", config)
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
            await client.try_complete_else_watch(["k"], 60_000, purgatory="mem")
            with pytest.raises(UnavailableError, match=r"'d' is not open yet: .*EEXIST") as down:
                await client.try_complete_else_watch(["k"], 60_000, purgatory="d")
            assert down.value.retry_delay == 0.5
            data.unlink()  # the directory can be made now

            async def opened() -> bool:
                try:
                    await client.get_purgatory("d")
                except UnavailableError:
                    return False
                return True

            await until(opened, timeout_s=10)
            status = await client.try_complete_else_watch(["k"], 60_000, purgatory="d")
            assert status.created
            assert (data / "d" / "journal").is_dir()
    finally:
        await server.stop(0.5)
