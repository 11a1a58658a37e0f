"""A plain (non-editable) ``pip install .`` gets every package and working gRPC stubs.

The editable install the test suite runs on maps whole directories, so a subpackage
missing from pyproject's package list would go unnoticed there; a built wheel would not
have it. This builds the wheel and imports the stubs from it alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from purgatory_server._engine import _native
from purgatory_server._service.native_modules import MODULES

# The wheel's mypyc build is minutes on a loaded 2-core machine; it runs in the setup of
# the module's first test, which pytest's per-test limit (120 s) would cut.
pytestmark = pytest.mark.timeout(420)

ROOT = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = {
    "purgatory_server": ROOT / "server" / "purgatory_server",
    "purgatory_client": ROOT / "client" / "purgatory_client",
    "purgatory_proto": ROOT / "proto" / "purgatory_proto",
    "purgatory_pipeline": ROOT / "pipeline" / "purgatory_pipeline",
}


def _build_wheel(tmp_path_factory: pytest.TempPathFactory, *, pure: bool) -> Path:
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources,
    # and a test must not leave those in the checkout (nor compiled extensions).
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "setup.py", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("server", "client", "proto", "pipeline"):
        shutil.copytree(
            ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so")
        )
    out = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_PYTHON_ENV}
    if pure:
        env[_native.PURE_PYTHON_ENV] = "1"
    # What the wheel carries is the point here, not how fast its C runs (setup.py).
    env["PURGATORY_MYPYC_OPT_LEVEL"] = "0"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(src),
        ],
        check=True,
        timeout=300,
        env=env,
    )
    [whl] = out.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``pip install .`` builds here: the compiled engine where a C compiler exists."""
    return _build_wheel(tmp_path_factory, pure=False)


def test_wheel_contains_every_source_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"{pkg}/{path.relative_to(src).as_posix()}"
        for pkg, src in SOURCE_PACKAGES.items()
        for path in src.rglob("*")
        if path.suffix in {".py", ".pyi", ".css", ".js"} or path.name == "py.typed"
        if "__pycache__" not in path.parts
    }
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel: {missing}"


def test_wheel_metadata_names_the_version_license_and_classifiers(wheel: Path) -> None:
    import purgatory_server

    archive = zipfile.ZipFile(wheel)
    [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    text = archive.read(metadata).decode()
    assert f"\nVersion: {purgatory_server.__version__}\n" in text  # read from the source
    assert "\nLicense-Expression: Apache-2.0\n" in text
    assert "\nLicense-File: LICENSE\n" in text and "Classifier: Typing :: Typed" in text
    [license_file] = [n for n in archive.namelist() if n.endswith("/licenses/LICENSE")]
    assert "Apache License" in archive.read(license_file).decode()[:200]


def test_stubs_import_from_the_wheel_alone(wheel: Path) -> None:
    # -S and -I keep the editable install and site-packages' other paths out: only the
    # wheel (a zip, importable as is since it is pure Python) and grpc/protobuf's own dirs.
    import google.protobuf
    import grpc

    deps = {Path(grpc.__file__).parent.parent, Path(google.protobuf.__file__).parents[2]}
    code = "\n".join(
        [
            f"import sys; sys.path[:0] = {[str(wheel), *map(str, deps)]!r}",
            "from purgatory_proto.v1 import purgatory_pb2, purgatory_pb2_grpc",
            "import purgatory_client, purgatory_server",
            f"assert purgatory_pb2.__file__.startswith({str(wheel)!r}), purgatory_pb2.__file__",
            "d = purgatory_pb2.DESCRIPTOR",
            "print(d.package, len(d.services_by_name))",
        ]
    )
    out = subprocess.run(
        [sys.executable, "-S", "-I", "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["purgatory.v1", "1"]


def _compiled_expected() -> bool:
    return _native.c_compiler_problem() is None and not _native.pure_python_forced()


def test_the_wheel_carries_the_compiled_engine_where_a_compiler_exists(
    wheel: Path, tmp_path: Path
) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    compiled = {  # dotted module names
        n.rsplit("/", 1)[0].replace("/", ".") + "." + n.split("/")[-1].split(".")[0]
        for n in names
        if n.startswith("purgatory_server/") and n.endswith(".so")
    }
    if not _compiled_expected():
        assert not compiled and wheel.name.endswith("-py3-none-any.whl"), wheel.name
        return
    engine = {f"purgatory_server._engine.{name}" for name in _native.engine_modules()}
    group = "purgatory_server._engine._compiled__mypyc"
    assert compiled == {*engine, *MODULES, group}, compiled
    # Installed (not imported from the zip, which cannot load extensions), it loads them.
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=120,
    )
    code = (
        f"import sys; sys.path.insert(0, {str(target)!r})\n"
        "import purgatory_server, purgatory_server._engine as e, inspect\n"
        "assert purgatory_server.__file__.startswith(sys.path[0]), purgatory_server.__file__\n"
        "print(e.COMPILED, inspect.isfunction(purgatory_server.TimerTask.cancel))"
    )
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_PYTHON_ENV}
    for pure, expected in ((False, "True False"), (True, "False True")):
        if pure:
            env[_native.PURE_PYTHON_ENV] = "1"
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected, (pure, out.stdout)


def test_a_pure_python_wheel_when_asked(tmp_path_factory: pytest.TempPathFactory) -> None:
    whl = _build_wheel(tmp_path_factory, pure=True)
    assert whl.name.endswith("-py3-none-any.whl"), whl.name
    assert not [n for n in zipfile.ZipFile(whl).namelist() if n.endswith(".so")]
