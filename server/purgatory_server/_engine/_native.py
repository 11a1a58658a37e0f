"""Which build of the engine this process runs: mypyc-compiled or the pure-Python sources.

Where a C compiler exists, ``setup.py`` compiles every module of this package except
``_NOT_COMPILED`` with mypyc, each extension next to its ``.py``, in one extension group
with whatever modules a package above names for it (the service's hot path: it calls the
engine's classes natively then); the path finder prefers the extension, and nothing else
in the code base knows which build it got.

``PURGATORY_PURE_PYTHON=1`` forces the sources when building (nothing is compiled) and
when importing (:func:`install` puts a source-only finder first), so one installation can
test both builds. :func:`install` must run before the first module it names is imported,
hence the package's ``__init__`` calls it (and the service's, for its own modules), and
this module imports nothing of the engine and does nothing on import (``setup.py`` loads
it from its file alone). It returns whether the named modules load compiled.

Rules for every class in a compiled module: ``allow_interpreted_subclasses=True`` (via
``mypyc_attr``) where Python code subclasses it; no Python base class, ``Generic[T]`` and ``ABC``
included (hence ``TimerTask``'s ``metaclass=ABCMeta``): mypyc's deallocator for such a
class never clears weak references, so a weak reference to a dead object points at freed
memory.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:

    def mypyc_attr(*_args: object, **_kwargs: object) -> object:
        """mypyc reads the decorator at compile time; interpreted, it changes nothing."""
        return lambda cls: cls


__all__ = [
    "PURE_PYTHON_ENV",
    "c_compiler_problem",
    "engine_modules",
    "install",
    "mypyc_attr",
    "pure_python_forced",
]

PURE_PYTHON_ENV = "PURGATORY_PURE_PYTHON"
PACKAGE = __name__.rpartition(".")[0]
# Interpreted in every build. ``purgatory`` because ``DelayedOperationPurgatory`` is
# generic (the rule above); it only adds the type parameter to ``PurgatoryCore``.
_NOT_COMPILED = frozenset({"__init__", "_native", "purgatory"})


def pure_python_forced() -> bool:
    """True when the environment asks for the pure-Python engine (``=1``, ``true``, ``yes``)."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in {"1", "true", "yes"}


def c_compiler_problem() -> str | None:
    """None if a C compiler builds against Python's headers here; else why not.

    ``CC`` overrides the compiler Python was built with, as in setuptools.
    """
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    include = sysconfig.get_path("include")
    if not Path(include, "Python.h").is_file():
        return f"Python.h not found in {include}"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "probe.c")
        source.write_text("#include <Python.h>\nint main(void) { return 0; }\n")
        try:
            subprocess.run(
                [*cc, f"-I{include}", "-c", str(source), "-o", str(Path(tmp, "probe.o"))],
                check=True,
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"C compiler {cc[0]!r} unusable ({exc.__class__.__name__})"
    return None


def engine_modules(package_dir: Path | None = None) -> list[str]:
    """Names (without the package) of the modules a compiled build compiles."""
    root = package_dir if package_dir is not None else Path(__file__).parent
    return sorted(p.stem for p in root.glob("*.py") if p.stem not in _NOT_COMPILED)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds each module it names (full dotted names) in its ``.py``, never in an
    extension."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, f"{leaf}.py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def _loads_compiled(fullname: str) -> bool:
    spec = importlib.util.find_spec(fullname)
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


def install(modules: Collection[str] = ()) -> bool:
    """Apply :data:`PURE_PYTHON_ENV` to ``modules`` (full dotted names; the engine's when
    empty) and return whether they will all load compiled. Call it before importing them
    (finding a module's spec imports its parent packages, never the module)."""
    names = list(modules) or [f"{PACKAGE}.{name}" for name in engine_modules()]
    if pure_python_forced():
        finder = next((f for f in sys.meta_path if isinstance(f, _SourceFinder)), None)
        if finder is None:
            finder = _SourceFinder()
            sys.meta_path.insert(0, finder)
        finder.names.update(names)
        return False
    return bool(names) and all(_loads_compiled(name) for name in names)
