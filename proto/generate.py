"""Generate (or check) the Python gRPC stubs from the .proto contract.

Usage:
    python proto/generate.py           # regenerate proto/purgatory_proto/ in place
    python proto/generate.py --check   # exit 1 if the committed stubs differ from proto/

Stubs are never edited by hand. The .proto files live at proto/purgatory/v1/ (package
``purgatory.v1``); protoc's ``-I virtual=disk`` mapping compiles them as if they lived at
purgatory_proto/v1/, so the generated modules import each other as
``purgatory_proto.v1.*`` (a bare ``purgatory`` package is taken on PyPI).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "purgatory" / "v1"
PKG = HERE / "purgatory_proto"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def generate(out_root: Path) -> list[Path]:
    protos = sorted(SRC.glob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {SRC}")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-Ipurgatory_proto/v1={SRC}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[f"purgatory_proto/v1/{p.name}" for p in protos],
    ]
    subprocess.run(cmd, check=True)
    return sorted((out_root / "purgatory_proto" / "v1").iterdir())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generated = generate(Path(tmp))
        target = PKG / "v1"
        if args.check:
            committed = {p.name for p in target.iterdir() if p.name.endswith(GENERATED_SUFFIXES)}
            fresh = {p.name for p in generated}
            stale = sorted(committed ^ fresh)
            stale += sorted(
                name
                for name in committed & fresh
                if not filecmp.cmp(target / name, Path(tmp) / "purgatory_proto/v1" / name, False)
            )
            if stale:
                print(f"stubs out of date with proto/: {', '.join(stale)}", file=sys.stderr)
                print("run: make stubs", file=sys.stderr)
                return 1
            print(f"stubs match proto/ ({len(fresh)} files)")
            return 0
        target.mkdir(parents=True, exist_ok=True)
        for old in target.iterdir():
            if old.name.endswith(GENERATED_SUFFIXES):
                old.unlink()
        for p in generated:
            shutil.copy2(p, target / p.name)
        print(f"wrote {len(generated)} files to {target.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
