"""The README's Python examples run as written, so the front page cannot drift from the code."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from tests.service.helpers import ServerThread

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
