"""README.md's walk-through as data: its fenced blocks, their commands, inline commands.

One parser for the two things that follow the README: ``tests/test_readme.py`` (every
block against an in-process server) and ``.ci/readme_walkthrough.py`` (CI's newcomer, in
the clean clone, before ``make test``). Standard library only: the CI script imports it
with the system Python, before ``make serve`` has created ``.venv``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_PATH = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def readme_text() -> str:
    return README_PATH.read_text()


def fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block of ``text``, in order."""
    return [(m[1], m[2]) for m in _FENCE.finditer(text)]


def fenced_at(text: str) -> list[tuple[int, str, str]]:
    """(offset, language, body) of every fenced block of ``text``, in order."""
    return [(m.start(), m[1], m[2]) for m in _FENCE.finditer(text)]


def inline_at(text: str, command: str, after: str) -> int:
    """Where the inline code span `` `command` `` first comes after ``after`` (the
    paragraph that tells the reader to run it) in ``text``; a line break may stand for a
    space, as in a wrapped paragraph. ValueError if either is absent."""
    start = text.find(after)
    if start < 0:
        raise ValueError(f"README.md no longer has {after!r}")
    pattern = r"\s+".join(re.escape(word) for word in command.split())
    m = re.compile(f"`{pattern}`").search(text, start)
    if m is None:
        raise ValueError(f"README.md no longer gives `{command}` after {after!r}")
    return m.start()


def block(blocks: list[tuple[str, str]], marker: str) -> str:
    """The one block whose body contains ``marker``."""
    [body] = [body for _, body in blocks if marker in body]
    return body


def commands(body: str, bin_dir: str = ".venv/bin/") -> list[str]:
    """A shell block's commands: comments dropped, continuation lines joined, and
    ``.venv/bin/`` replaced by ``bin_dir``."""
    joined = body.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        command = line.split("  #")[0].strip()
        if command and not command.startswith("#"):
            out.append(command.replace(".venv/bin/", bin_dir))
    return out
