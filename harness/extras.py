"""The requirements of some of ``pyproject.toml``'s extras, one per line.

``make install`` feeds them to pip (``-r /dev/stdin``) when ``make serve`` already
installed these sources (editable, the engine compiled): only the other extras'
requirements are added, and the project with its mypyc build is not built a second time.

    python harness/extras.py dev,server,client
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extras: list[str]) -> list[str]:
    """The requirement strings of ``extras``, in order, each once."""
    table = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    unknown = [name for name in extras if name not in table]
    if unknown:
        raise SystemExit(f"extras.py: no such extra in pyproject.toml: {', '.join(unknown)}")
    return list(dict.fromkeys(req for name in extras for req in table[name]))


if __name__ == "__main__":
    names = [name for arg in sys.argv[1:] for name in arg.split(",") if name]
    sys.stdout.write("".join(f"{req}\n" for req in requirements(names)))
