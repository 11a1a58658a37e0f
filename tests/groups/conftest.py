"""Fixtures of the worker-group tests: the service tests' server fixture."""

from tests.service.conftest import serve  # noqa: F401 - the same server fixture
