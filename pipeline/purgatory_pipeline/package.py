"""``python -m purgatory_pipeline.package OUT.zip``: the zip for ``spark-submit --py-files``.

It holds the two pure-Python packages the jobs import on executors: ``purgatory_pipeline``
and ``purgatory_proto`` (the generated message classes). Their third-party dependencies
(pyarrow, protobuf, grpcio for the live source) must be installed in the executors' Python.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import purgatory_proto

import purgatory_pipeline

__all__ = ["build_zip"]


def build_zip(out: Path) -> Path:
    """Write the zip and return its path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in (purgatory_pipeline, purgatory_proto):
            root = Path(package.__file__).resolve().parent  # type: ignore[arg-type]
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, Path(root.name) / path.relative_to(root))
    return out


if __name__ == "__main__":
    print(build_zip(Path(sys.argv[1] if len(sys.argv) > 1 else "dist/purgatory_pipeline.zip")))  # noqa: T201
