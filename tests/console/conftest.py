"""Fixtures of the console tests: the security tests' test-time certificates."""

from tests.security.conftest import certs  # noqa: F401 - the same CA and server certificate
