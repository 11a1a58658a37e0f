"""The service tests' server fixtures, shared: real servers on 127.0.0.1:0, always stopped."""

from tests.service.conftest import serve, server_thread  # noqa: F401 - the same fixtures
