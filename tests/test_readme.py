"""The README's Python examples run as written, so the front page cannot drift from the code."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import replace
from pathlib import Path

from purgatory_server._service.config import Limits

from tests.service.helpers import TEST_CONFIG, ServerThread

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def _block(marker: str) -> str:
    [block] = [b for b in BLOCKS if marker in b]
    return block


def test_engine_example_runs() -> None:
    exec(compile(_block("DelayedOperationPurgatory"), "README.md", "exec"), {})


def test_client_example_runs_against_a_real_server() -> None:
    code = _block("Condition.all_keys()")
    with ServerThread() as st:
        code = code.replace('"127.0.0.1:50051"', repr(st.target))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().strip() == "COMPLETED"


def test_many_operations_example_runs_against_a_real_server() -> None:
    code = _block("watch_many")
    with ServerThread() as st:
        code = code.replace('"127.0.0.1:50051"', repr(st.target))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().split("\n")[:2] == ["ack-0 COMPLETED", "ack-1 EXPIRED"]


def test_delayed_message_example_runs_against_a_real_server() -> None:
    code = _block("iter_operations")
    # The server's default limits (the test config caps timeouts at 10 minutes).
    with ServerThread(replace(TEST_CONFIG, limits=Limits())) as st:
        code = code.replace('"127.0.0.1:50051"', repr(st.target))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == ["order-42 45", "order-43 30"]
