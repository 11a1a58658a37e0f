"""Shared helpers of the service tests: a small-limits config, bounded polling, and a
server running on its own loop thread (for the blocking client and the CLI)."""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from purgatory_client import AsyncPurgatoryClient
from purgatory_server._service import Limits, PurgatoryServer, ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

# Small limits so that every limit is cheap to hit in a test.
TEST_LIMITS = Limits(
    max_keys_per_operation=8,
    max_key_length=32,
    max_operation_id_length=40,
    max_name_length=32,
    max_payload_bytes=64,
    max_signal_data_bytes=16,
    max_result_data_bytes=24,
    max_result_sources=8,
    min_timeout_ms=5,
    max_timeout_ms=600_000,
    max_batch_size=20_000,
    max_purgatories=8,
    max_subscribers=3,
    subscriber_buffer=4,
    max_tracked_values=100,
)
# The server reads its catalog of durable purgatories from data_dir at start-up: point it
# at a private, empty directory so no test sees a developer's ./data (or another run's).
TEST_DATA_DIR = tempfile.mkdtemp(prefix="purgatory-service-tests-")
atexit.register(shutil.rmtree, TEST_DATA_DIR, True)

TEST_CONFIG = ServerConfig(
    listen="127.0.0.1:0",
    data_dir=TEST_DATA_DIR,
    grace_s=1.0,
    limits=TEST_LIMITS,
    defaults=PurgatorySettings(max_pending=50, retained_events=50),
    purgatories=(PurgatorySettings(name="default", max_pending=50, retained_events=50),),
)


async def until(predicate: Callable[[], Awaitable[bool]], timeout_s: float = 5.0) -> None:
    """Poll ``predicate`` until true; fail after ``timeout_s`` (bounded, never hangs)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def pending(client: AsyncPurgatoryClient, purgatory: str = "default") -> int:
    return (await client.get_purgatory(purgatory)).pending


async def until_subscribers(
    client: AsyncPurgatoryClient, count: int, purgatory: str = "default"
) -> None:
    """Until the purgatory counts ``count`` subscribers: streams opened before are
    registered, so each sees every outcome published from now on (no sleep to guess it)."""

    async def subscribed() -> bool:
        return (await client.get_purgatory(purgatory)).subscribers == count

    await until(subscribed)


async def until_pending(
    client: AsyncPurgatoryClient, count: int, purgatory: str = "default"
) -> None:
    """Until the purgatory holds ``count`` pending operations (a long-poll sent before is
    registered: signals from now on count for it)."""

    async def registered() -> bool:
        return await pending(client, purgatory) == count

    await until(registered)


class ServerThread:
    """A server on its own event loop in a daemon thread; use as a context manager."""

    def __init__(self, config: ServerConfig = TEST_CONFIG) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.server: PurgatoryServer | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def target(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    def __enter__(self) -> ServerThread:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(create_server("127.0.0.1:0", self.config), self.loop)
        self.server, _ = fut.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.server is not None:
                asyncio.run_coroutine_threadsafe(self.server.stop(0.5), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop thread (the registry is loop-confined)."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)


def config_with(**limits: Any) -> ServerConfig:
    return replace(TEST_CONFIG, limits=replace(TEST_LIMITS, **limits))
