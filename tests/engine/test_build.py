"""The engine's two builds: mypyc-compiled where a C compiler exists, pure Python otherwise.

``make test`` runs the engine and service tests twice, the second time with
``PURGATORY_PURE_PYTHON=1``; these tests pin which build each run really loaded, and
what the compiled build must keep from the pure one: interpreted subclasses, and weak
references that die cleanly (with an ``ABC`` or ``Generic`` base, mypyc 2.4's compiled
classes left them pointing at freed memory: the interpreter crashed). Checks that could
crash run in a child process.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import purgatory_server._engine as engine
import purgatory_server._service as service
import pytest
from purgatory_server import TimerTask
from purgatory_server._engine import _native
from purgatory_server._service.native_modules import MODULES

from harness import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = Path(engine.__file__).parent
PACKAGE_DIR = ENGINE_DIR.parent
PURE_FORCED = _native.pure_python_forced()


def _compiled_build_expected() -> bool:
    """Whether this environment builds the compiled engine (what setup.py decides)."""
    return (
        not PURE_FORCED
        and _native.c_compiler_problem() is None
        and importlib.util.find_spec("mypyc") is not None
    )


def _env(build: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_PYTHON_ENV}
    if build == "pure":
        env[_native.PURE_PYTHON_ENV] = "1"
    return env


def _run(code: str, build: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(build),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, f"{build} build: exit {out.returncode}\n{out.stderr[-3000:]}"
    return out.stdout


# The compiled build is tested where it can exist: with no C compiler, Python headers or
# mypyc, or with PURGATORY_PURE_PYTHON set, the install is pure Python by design.
NO_COMPILER = "no compiled build here (no C compiler/headers/mypyc, or pure Python forced)"
BUILDS = [
    "pure",
    pytest.param(
        "compiled", marks=pytest.mark.skipif(not _compiled_build_expected(), reason=NO_COMPILER)
    ),
]


def test_this_process_runs_the_build_the_environment_makes() -> None:
    cancel = TimerTask.__dict__["cancel"]
    if _compiled_build_expected():
        # A C compiler is here, so `make install` compiled the engine: a silent fallback to
        # the sources (a stale or failed build) must fail the suite.
        assert engine.COMPILED, "a C compiler exists but the pure-Python engine was loaded"
        assert not inspect.isfunction(cancel), "TimerTask.cancel is Python bytecode"
        # The service's hot path is compiled with it, in the same extension group.
        assert service.COMPILED, "the engine is compiled but the service's hot path is not"
        modules = [f"purgatory_server._engine.{name}" for name in _native.engine_modules()]
        for name in [*modules, *MODULES]:
            spec = importlib.util.find_spec(name)
            assert spec is not None
            assert isinstance(spec.loader, importlib.machinery.ExtensionFileLoader), name
    else:
        assert not engine.COMPILED and not service.COMPILED
        assert inspect.isfunction(cancel)


def test_the_environment_variable_forces_the_sources_at_import() -> None:
    code = (
        "import purgatory_server, purgatory_server._engine as e, inspect\n"
        "import purgatory_server._service as s\n"
        "from purgatory_server._engine import timer_task\n"
        "from purgatory_server._service.core import operation\n"
        "print(e.COMPILED, s.COMPILED, timer_task.__spec__.origin.endswith('.py'),"
        " operation.__spec__.origin.endswith('.py'),"
        " inspect.isfunction(purgatory_server.TimerTask.cancel))"
    )
    assert _run(code, "pure").split() == ["False", "False", "True", "True", "True"]


def test_the_compiled_build_is_not_older_than_its_sources() -> None:
    """An editable install compiles in place; an engine edit without a rebuild (`make
    engine`, or `make test`, which does it) would test yesterday's code."""
    if not engine.COMPILED or not ENGINE_DIR.is_relative_to(ROOT):
        pytest.skip("no compiled engine in this checkout (pure Python, or a wheel install)")
    sources = [ENGINE_DIR / f"{name}.py" for name in _native.engine_modules()]
    sources += [PACKAGE_DIR.joinpath(*name.split(".")[1:]).with_suffix(".py") for name in MODULES]
    compiled = min(p.stat().st_mtime for p in PACKAGE_DIR.rglob("*.so"))
    stale = [str(p.relative_to(PACKAGE_DIR)) for p in sources if p.stat().st_mtime > compiled]
    assert not stale, f"edited after the engine was compiled: {stale}; run `make engine`"


WEAKREFS = """
import gc, weakref
from purgatory_server import DelayedOperation, DelayedOperationPurgatory, MockTime, TimerTask

class Task(TimerTask):
    def run(self): pass

class SlottedTask(TimerTask):
    __slots__ = ("x", "__weakref__")
    def run(self): pass

class Op(DelayedOperation):
    def try_complete(self): return self.force_complete()
    def on_complete(self): pass
    def on_expiration(self): pass

clock = MockTime()
p = DelayedOperationPurgatory("w", reaper_enabled=False, time=clock)
op = Op(1000)
assert p.try_complete_else_watch(op, ["k"]) is True
objects = [Task(5), SlottedTask(5), op, p, DelayedOperationPurgatory("x", reaper_enabled=False)]
refs = [weakref.ref(o) for o in objects]
for o in objects[3:]:
    o.shutdown()
del o, op, p, objects
gc.collect()
print([r() for r in refs])
"""


@pytest.mark.parametrize("build", BUILDS)
def test_weak_references_to_engine_objects_die_cleanly(build: str) -> None:
    assert _run(WEAKREFS, build).split() == ["[None,", "None,", "None,", "None,", "None]"]


INTERPRETED_SUBCLASSES = """
import threading
from purgatory_server import DelayedOperation, DelayedOperationPurgatory, MockTime, SystemTimer
from purgatory_server._engine import COMPILED

class Counting(SystemTimer):  # a Python subclass of a compiled class, overriding a method
    adds = 0
    def add(self, task):
        Counting.adds += 1
        super().add(task)

class Op(DelayedOperation):
    __slots__ = ("ready", "expired_on")
    def __init__(self, ms):
        super().__init__(ms)
        self.ready = False
        self.expired_on = None
    def try_complete(self):
        return self.ready and self.force_complete()
    def on_complete(self): pass
    def on_expiration(self):
        self.expired_on = threading.current_thread().name

clock = MockTime()
timer = Counting("t", time=clock)
p = DelayedOperationPurgatory("s", timer=timer, reaper_enabled=False, time=clock)
a, b = Op(10), Op(10)
p.try_complete_else_watch(a, ["x"])
p.try_complete_else_watch(b, ["y"])
a.ready = True
assert p.check_and_complete("x") == 1
clock.sleep(10)
while timer.advance_clock(0):
    pass
assert timer._wait_executor_idle(10)
assert (a.is_completed(), a.expired_on) == (True, None)
assert b.expired_on == "executor-t", b.expired_on
print(COMPILED, Counting.adds, p.num_delayed(), p.watched())
p.shutdown()
"""


@pytest.mark.parametrize("build", BUILDS)
def test_interpreted_subclasses_of_compiled_classes(build: str) -> None:
    expected_compiled = "True" if build == "compiled" else "False"
    assert _run(INTERPRETED_SUBCLASSES, build).split() == [expected_compiled, "2", "0", "0"]


@pytest.mark.parametrize("build", BUILDS)
def test_the_readme_engine_example_runs(build: str) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)
    [example] = [b for b in blocks if "DelayedOperationPurgatory" in b]
    _run(example, build)


def test_the_server_logs_which_engine_runs(tmp_path: Path) -> None:
    args = ["--log-level", "INFO", "--data-dir", str(tmp_path / "data")]
    with ServerProcess(tmp_path, args) as server:
        line = server.wait_log(r".*listening on.*")[0]
    expected = "compiled (mypyc)" if engine.COMPILED else "pure Python"
    assert f"engine: {expected}" in line, line


def test_abstract_methods_are_still_declared() -> None:
    # ABCMeta instead of an ABC base (see _native): the interpreted build still refuses
    # to instantiate an operation that lacks them (compiled classes do not check them at
    # run time); mypy refuses it in both.
    code = (
        "from purgatory_server import DelayedOperation\n"
        "try:\n"
        "    DelayedOperation(10)\n"
        "except TypeError as exc:\n"
        "    print('refused', 'abstract' in str(exc))\n"
    )
    assert _run(code, "pure").split() == ["refused", "True"]
