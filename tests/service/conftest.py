"""Fixtures for the service tests: real servers on 127.0.0.1:0, always stopped.

``serve`` starts servers on the test's event loop (for the async client);
``server_thread`` runs one on its own loop in a background thread (for the blocking client
and the CLI). Every server is stopped with ``stop(grace)`` in a ``finally``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from purgatory_client import AsyncPurgatoryClient
from purgatory_server._service import PurgatoryServer, ServerConfig, create_server

from tests.service.helpers import TEST_CONFIG, ServerThread

ServeFn = Callable[..., Awaitable[tuple[PurgatoryServer, int]]]


@pytest.fixture
async def serve() -> AsyncIterator[ServeFn]:
    """``await serve(config=..., **create_server_kwargs)`` -> (server, port)."""
    started: list[PurgatoryServer] = []

    async def _serve(config: ServerConfig = TEST_CONFIG, **kwargs: Any) -> tuple[Any, int]:
        server, port = await create_server("127.0.0.1:0", config, **kwargs)
        started.append(server)
        return server, port

    try:
        yield _serve
    finally:
        for server in started:
            await server.stop(0.5)


@pytest.fixture
async def server(serve: ServeFn) -> PurgatoryServer:
    srv, _ = await serve()
    return srv


@pytest.fixture
async def client(server: PurgatoryServer) -> AsyncIterator[AsyncPurgatoryClient]:
    async with AsyncPurgatoryClient(f"127.0.0.1:{server.port}", timeout=10) as c:
        yield c


@pytest.fixture
def server_thread() -> Iterator[ServerThread]:
    with ServerThread() as st:
        yield st
