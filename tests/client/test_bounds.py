"""The CLI's bounds are the server's: what the CLI lets through, a default server accepts,
and what no server accepts the CLI refuses before calling (a usage error, exit status 2).

purgatory_client._bounds mirrors the server's constants (the client must not import the
server); this test is where the two are compared.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_client import _bounds
from purgatory_client.cli import main
from purgatory_server._service.config import server_config
from purgatory_server._service.config.server_config import ConfigError, Limits, ServerConfig
from purgatory_server._service.groups import backoff, group_config
from purgatory_server._service.schedules import timing

from tests.service.helpers import ServerThread


def test_the_clients_bounds_mirror_the_servers() -> None:
    assert _bounds.MIN_TIMEOUT_MS == server_config.MIN_TIMEOUT_MS
    assert _bounds.MAX_TIMEOUT_MS == server_config.MAX_TIMEOUT_MS
    assert _bounds.MIN_EVERY_MS == timing.MIN_EVERY_MS
    assert _bounds.MIN_VISIBILITY_TIMEOUT_MS == group_config.MIN_VISIBILITY_TIMEOUT_MS
    assert _bounds.MAX_VISIBILITY_TIMEOUT_MS == group_config.MAX_VISIBILITY_TIMEOUT_MS
    assert _bounds.MAX_ATTEMPTS == group_config.MAX_ATTEMPTS
    assert _bounds.MAX_PREFETCH == group_config.MAX_PREFETCH
    assert _bounds.MAX_RETRY_DELAY_MS == backoff.MAX_RETRY_DELAY_MS
    # A server's configured range lies inside the fixed one.
    assert Limits().min_timeout_ms >= server_config.MIN_TIMEOUT_MS
    with pytest.raises(ConfigError, match="min_timeout_ms must be >= 1"):
        ServerConfig(limits=Limits(min_timeout_ms=0)).validate()


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    # The server's default limits, as `make serve` runs it (its own data directory).
    data: Path = tmp_path_factory.mktemp("data")
    with ServerThread(ServerConfig(data_dir=str(data))) as st:
        yield st


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("watch", "k", "--timeout-ms", "0"), "--timeout-ms: must be at least 1, got 0"),
        (
            ("watch", "k", "--timeout-ms", str(_bounds.MAX_TIMEOUT_MS + 1)),
            f"--timeout-ms: must be at most {_bounds.MAX_TIMEOUT_MS}",
        ),
        (("reschedule", "op", "--timeout-ms", "0"), "--timeout-ms: must be at least 1"),
        (("reschedule", "op", "--due-time-ms", "0"), "--due-time-ms: must be at least 1"),
        (("batch", "watch", "--timeout-ms", "0"), "--timeout-ms: must be at least 1"),
        (("schedule", "set", "s", "--every-ms", "99"), "--every-ms: must be at least 100"),
        (
            ("subscribe", "--group", "g", "--visibility-timeout-ms", "5"),
            "--visibility-timeout-ms: must be at least 10",
        ),
        (("subscribe", "--group", "g", "--max-attempts", "1001"), "must be at most 1000"),
        (("subscribe", "--group", "g", "--prefetch", "10001"), "must be at most 10000"),
    ],
)
def test_what_no_server_accepts_is_a_usage_error(
    server: ServerThread, argv: tuple[str, ...], message: str
) -> None:
    code, out, err = _run("--target", server.target, *argv)
    assert (code, out) == (2, ""), err
    assert message in err and "Traceback" not in err, err


def test_the_clis_smallest_timeout_is_accepted_by_a_default_server(server: ServerThread) -> None:
    code, out, err = _run("--target", server.target, "watch", "k", "--timeout-ms", "1", "--no-wait")
    assert code == 0, err
    assert json.loads(out)["operation_id"]
