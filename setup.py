"""Build step that pyproject.toml cannot express: the engine and the hot path compiled with mypyc.

Everything else (metadata, packages, extras) lives in pyproject.toml. Where a C compiler
and Python's headers exist, every module of ``purgatory_server/_engine`` except
``__init__``, ``_native`` and ``purgatory`` (``_native._NOT_COMPILED``), and the service
modules that ``purgatory_server/_service/native_modules.py`` names, are compiled into one
extension group installed next to the sources (which stay in the wheel, so the pure-Python
build can still be forced at import time). Otherwise, or with ``PURGATORY_PURE_PYTHON=1``,
nothing is compiled and the install is pure Python. The reason is printed either way, so a
build log says which one it produced. docs/benchmarks.md §14 ("mypyc") has what compiling buys.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
ENGINE = Path("server", "purgatory_server", "_engine")
# The C compiler's optimisation level (mypyc's opt_level, "0" to "3"): a build that only
# checks what a wheel carries (tests/test_packaging.py) takes "0", a quarter of the time.
OPT_LEVEL_ENV = "PURGATORY_MYPYC_OPT_LEVEL"
# The build environment has only the build requirements: the modules the hot path imports
# for types alone (grpc, protobuf's stubs, the optional extras) are not there to check.
MYPY_FLAGS = ["--ignore-missing-imports", "--follow-imports=silent"]
SERVICE_LIST = Path("server", "purgatory_server", "_service", "native_modules.py")


def _load(path: Path, name: str) -> ModuleType:
    """A module loaded from its file alone (it imports only the standard library)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_native() -> ModuleType:
    """The engine's ``_native`` module: which engine modules are compiled and how the
    override is spelled."""
    return _load(ENGINE / "_native.py", "_purgatory_native")


def _service_sources() -> list[str]:
    """The service modules compiled with the engine, as source paths."""
    listed: tuple[str, ...] = _load(SERVICE_LIST, "_purgatory_service_native").MODULES
    return [str(Path("server", *name.split(".")).with_suffix(".py")) for name in listed]


def _engine_extensions() -> list[Extension]:
    native = _load_native()
    if native.pure_python_forced():
        print(f"purgatory: {native.PURE_PYTHON_ENV} set: pure-Python engine")
        return []
    why_not = native.c_compiler_problem()
    if why_not is not None:
        print(f"purgatory: {why_not}: pure-Python engine", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify  # noqa: PLC0415 (optional: absent means pure Python)
    except ImportError:
        print("purgatory: mypyc is not installed: pure-Python engine", file=sys.stderr)
        return []
    modules = native.engine_modules(ROOT / ENGINE)
    service = _service_sources()
    print(
        f"purgatory: compiling the engine ({len(modules)} modules) and the service's hot "
        f"path ({len(service)}) with mypyc"
    )
    try:
        return mypycify(
            [*MYPY_FLAGS, *(str(ENGINE / f"{name}.py") for name in modules), *service],
            group_name="purgatory_server._engine._compiled",
            opt_level=os.environ.get(OPT_LEVEL_ENV, "3"),
        )
    # mypyc reports a module it cannot compile by exiting; either way the install goes on
    # pure Python, and the test that expects the compiled engine says so.
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        print(f"purgatory: mypyc failed ({exc!r}): pure-Python engine", file=sys.stderr)
        return []


def _compiled_files() -> list[Path]:
    """The extensions a compiled build leaves next to the sources."""
    found = [p for p in (ROOT / ENGINE).iterdir() if p.suffix in {".so", ".pyd"}]
    for source in _service_sources():
        found.extend(p for p in (ROOT / source).parent.glob(f"{Path(source).stem}.*.so"))
        found.extend(p for p in (ROOT / source).parent.glob(f"{Path(source).stem}.*.pyd"))
    return found


def _remove_compiled_engine() -> None:
    for path in _compiled_files():
        path.unlink()


class BuildEngine(build_ext):
    """``build_ext`` that falls back to the pure-Python engine when the C build fails.

    A half-built engine must not stay behind: the in-place extensions of an editable
    install (and any older ones) are removed, so the sources are what imports.
    """

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 (any C build failure means: pure Python)
            print(f"purgatory: C build failed ({exc}): pure-Python engine", file=sys.stderr)
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            _remove_compiled_engine()
            return
        # Extensions whose C did not change are not rebuilt nor copied again; stamping the
        # in-place ones says "compiled from the sources as they are now" to the test that
        # catches an edit without a rebuild (tests/engine/test_build.py).
        for path in _compiled_files():
            os.utime(path)


# Commands that build what they install; the others (egg_info and the metadata hooks pip
# calls first) only need metadata, so they skip the probe and mypyc's minute of work.
BUILDING = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}
extensions = _engine_extensions() if BUILDING.intersection(sys.argv[1:]) else []
in_place = {"editable_wheel", "develop", "--inplace", "-i"}.intersection(sys.argv[1:])
if in_place and not extensions:
    # A pure in-place build of a checkout that was compiled before must not leave the old
    # extensions there (an editable install imports them first).
    _remove_compiled_engine()
setup(ext_modules=extensions, cmdclass={"build_ext": BuildEngine})
