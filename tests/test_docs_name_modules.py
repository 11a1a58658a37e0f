"""Every module the docs name exists: a layout change that leaves docs pointing at a
moved or renamed file fails here, not in a reader's hands.

A name is a backticked ``something.py`` (a bare module name, matched by file name
anywhere in the repository) or ``dir/something.py`` (matched as a path suffix).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "node_modules", ".git", "build", "pipeline-out", ".cluster"}
NAMED = re.compile(r"`([A-Za-z0-9_./-]*[A-Za-z0-9_]\.py)\b")


def _repository_files() -> list[str]:
    return [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*.py")
        if not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)
    ]


def test_every_module_the_docs_name_exists() -> None:
    files = _repository_files()
    names = {f.rsplit("/", 1)[-1] for f in files}
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for named in NAMED.findall(line):
                if "/" in named:
                    # ./ and ../ dropped, a hidden directory's dot kept (.ci/run's scripts)
                    suffix = re.sub(r"^(\.\.?/)+", "", named)
                    found = any(f == suffix or f.endswith("/" + suffix) for f in files)
                else:
                    found = named in names
                if not found:
                    missing.append(f"{doc.relative_to(ROOT)}:{number}: {named}")
    assert not missing, "docs name modules that do not exist:\n" + "\n".join(missing)
