"""Build step that pyproject.toml cannot express: the engine compiled with mypyc.

Everything else (metadata, packages, extras) lives in pyproject.toml. Where a C compiler
and Python's headers exist, every module of ``purgatory_server/_engine`` except
``__init__``, ``_native`` and ``purgatory`` (``_native._NOT_COMPILED``) is compiled into one
extension group installed next to the sources (which stay in the wheel, so the pure-Python
engine can still be forced at import time). Otherwise, or with ``PURGATORY_PURE_PYTHON=1``,
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


def _load_native() -> ModuleType:
    """The engine's ``_native`` module, loaded from its file alone (stdlib imports only):
    the one place that says which modules are compiled and how the override is spelled."""
    spec = importlib.util.spec_from_file_location("_purgatory_native", ROOT / ENGINE / "_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    print(f"purgatory: compiling the engine with mypyc ({len(modules)} modules)")
    try:
        return mypycify(
            [str(ENGINE / f"{name}.py") for name in modules],
            group_name="purgatory_server._engine._compiled",
            opt_level="3",
        )
    # mypyc reports a module it cannot compile by exiting; either way the install goes on
    # pure Python, and the test that expects the compiled engine says so.
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        print(f"purgatory: mypyc failed ({exc!r}): pure-Python engine", file=sys.stderr)
        return []


def _remove_compiled_engine() -> None:
    for path in (ROOT / ENGINE).iterdir():
        if path.suffix in {".so", ".pyd"}:
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
        for path in (ROOT / ENGINE).iterdir():
            if path.suffix in {".so", ".pyd"}:
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
