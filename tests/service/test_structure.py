"""The server package's shape: the core loads without grpc (only ``_service/api`` imports
it), each package's docstring maps all its modules, no two modules share a name, no import
cycle between modules, and packages import only the layers below their own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import purgatory_server

PACKAGE = Path(purgatory_server.__file__).parent
SERVICE = PACKAGE / "_service"
# The server's packages, top layer first (docs/architecture.md draws the same table). A
# package imports only packages of layers below its own, never one beside or above it,
# at run time (function-local imports included) and for the type checker alike.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("purgatory_server", "purgatory_server.__main__", "purgatory_server._service"),
    ("purgatory_server._service.api",),
    ("purgatory_server._service.console",),
    ("purgatory_server._service.workers",),
    ("purgatory_server._cluster",),
    ("purgatory_server._service.durable",),
    ("purgatory_server._service.wire", "purgatory_server._service.observability"),
    ("purgatory_server._service.core",),
    ("purgatory_server._service.groups", "purgatory_server._service.schedules"),
    ("purgatory_server._service.outcomes",),
    ("purgatory_server._service.telemetry",),
    ("purgatory_server._service.config",),
    ("purgatory_server._service.model",),
    (
        "purgatory_server._engine",
        "purgatory_server._journal",
        "purgatory_server._version",
        "purgatory_server._service.native_modules",
    ),
)
# The edge: the gRPC handlers, the status mapping and the server's assembly.
EDGE = SERVICE / "api"
CLUSTER = PACKAGE / "_cluster"


def _imports_grpc(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(n == "grpc" or n.startswith(("grpc.", "grpc_")) for n in names):
            return True
    return False


def test_only_the_edge_imports_grpc() -> None:
    importers = {p for p in PACKAGE.rglob("*.py") if _imports_grpc(p)}
    outside = sorted(p.relative_to(PACKAGE).as_posix() for p in importers if EDGE not in p.parents)
    assert outside == []
    # The check sees imports: without this the edge could be empty and the test still pass.
    assert EDGE / "servicer.py" in importers


def test_each_package_docstring_maps_all_its_modules() -> None:
    """A newcomer reads a package's ``__init__`` first: every module is named there."""
    missing: dict[str, list[str]] = {}
    for init in [*sorted(SERVICE.rglob("__init__.py")), CLUSTER / "__init__.py"]:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        modules = sorted(p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py")
        absent = [m for m in modules if f"``{m}``" not in doc and f":mod:`.{m}`" not in doc]
        if absent:
            missing[init.parent.relative_to(PACKAGE).as_posix()] = absent
    assert missing == {}


def test_the_core_runs_without_grpc_loaded() -> None:
    code = (
        "import sys, asyncio\n"
        "from purgatory_server._service.core.named_purgatory import NamedPurgatory\n"
        "from purgatory_server._service.core.registry import PurgatoryRegistry\n"
        "from purgatory_server._service.wire.validation import operation_requests\n"
        "from purgatory_server._service.durable.local_store import durable_factory\n"
        "from purgatory_server._service.config.server_config import Limits, PurgatorySettings\n"
        "async def main():\n"
        "    r = PurgatoryRegistry(Limits(), PurgatorySettings(), asyncio.get_running_loop())\n"
        "    r.create(r.settings_for('p', None))\n"
        "    await r.shutdown()\n"
        "asyncio.run(main())\n"
        "loaded = sorted(m for m in sys.modules if m == 'grpc' or m.startswith('grpc'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _module(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, prefix: str = "purgatory_", typing: bool = False) -> set[str]:
    """Modules of this package imported when ``path`` loads (with ``typing``, those
    imported under TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(prefix):
                found.add(n.module)
                found.update(f"{n.module}.{a.name}" for a in n.names)
            elif isinstance(n, ast.Import):
                found.update(a.name for a in n.names)
    return found


def _import_graph(package: Path = PACKAGE, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at run time (a package's own
    ``__init__`` is left out: it is loaded before its modules anyway)."""
    paths = {_module(p, package): p for p in package.rglob("*.py")}
    return {
        mod: {
            dep
            for dep in _runtime_imports(path, package.name, typing)
            if dep in paths and dep != mod and not mod.startswith(dep + ".")
        }
        for mod, path in paths.items()
    }


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def visit(mod: str, stack: list[str]) -> list[str] | None:
        if mod in stack:
            return [*stack[stack.index(mod) :], mod]
        if mod in done:
            return None
        for dep in sorted(graph.get(mod, ())):
            if (cycle := visit(dep, [*stack, mod])) is not None:
                return cycle
        done.add(mod)
        return None

    for mod in sorted(graph):
        if (cycle := visit(mod, [])) is not None:
            return cycle
    return None


def test_the_cycle_finder_finds_cycles() -> None:
    # Without this the check below could pass by never finding anything.
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None


def test_no_import_cycle() -> None:
    """Run-time imports (function-level ones included; TYPE_CHECKING ones not) are acyclic."""
    graph = _import_graph()
    # The graph sees imports (else the check below would pass by seeing nothing).
    service = "purgatory_server._service"
    assert f"{service}.core.named_purgatory" in graph[f"{service}.core.registry"]
    assert f"{service}.schedules.table" in graph[f"{service}.core.named_purgatory"]
    assert _find_cycle(graph) is None


def test_features_do_not_import_the_purgatory_that_owns_them() -> None:
    """A schedule table is built by its purgatory and typed by a protocol: even for type
    checking, ``schedules.table`` does not import ``named_purgatory`` (the cycle that
    wiring features by attribute assignment made)."""
    table = SERVICE / "schedules" / "table.py"
    imported = {
        n.module
        for n in ast.walk(ast.parse(table.read_text()))
        if isinstance(n, ast.ImportFrom) and n.module
    }
    assert "purgatory_server._service.core.named_purgatory" not in imported


def test_no_two_modules_share_a_name() -> None:
    names = [p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"]
    assert len(names) > 100  # the walk sees the package
    assert sorted({n for n in names if names.count(n) > 1}) == []


def _package_of(module: str) -> str:
    """The package ``module`` belongs to for layering: ``_service``'s subpackages, the
    other private packages, and the top-level modules each on their own."""
    parts = module.split(".")
    return ".".join(parts[: 3 if parts[1:2] == ["_service"] else 2])


def _layer_violations(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each import of a package beside or above the importer's own layer, and each module
    that no layer holds, as ``importer -> imported`` lines."""
    index = {package: i for i, layer in enumerate(layers) for package in layer}
    found = []
    for mod, deps in sorted(graph.items()):
        layer = index.get(_package_of(mod))
        if layer is None:
            found.append(f"{mod}: in no layer")
            continue
        for dep in sorted(deps):
            if _package_of(dep) == _package_of(mod):
                continue
            dep_layer = index.get(_package_of(dep))
            if dep_layer is None or dep_layer <= layer:
                found.append(f"{mod} -> {dep}")
    return found


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_layering_check_finds_an_upward_import(tmp_path: Path) -> None:
    """A synthetic package: a downward import passes; an upward one, even inside a
    function, is reported; one under TYPE_CHECKING is not (it never runs)."""
    layers = (("synth",), ("synth.top",), ("synth.bottom",))
    files = {
        "synth/__init__.py": "",
        "synth/top/__init__.py": "",
        "synth/top/a.py": "from synth.bottom.b import f\n",
        "synth/bottom/__init__.py": "",
        "synth/bottom/b.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from synth.top.a import f as g\n"
            "def f():\n"
            "    return 1\n"
        ),
    }
    package = _write_package(tmp_path, files) / "synth"
    graph = _import_graph(package)
    assert graph["synth.top.a"] == {"synth.bottom.b"}
    assert _layer_violations(graph, layers) == []
    # The type checker's view sees the TYPE_CHECKING import, which goes up.
    typed = _layer_violations(_import_graph(package, typing=True), layers)
    assert typed == ["synth.bottom.b -> synth.top.a"]
    (package / "bottom" / "b.py").write_text(
        "def f():\n    from synth.top.a import f\n    return f\n"
    )
    assert _layer_violations(_import_graph(package), layers) == ["synth.bottom.b -> synth.top.a"]
    # Beside is as wrong as above: two packages of one layer stay independent.
    side = (("synth",), ("synth.top", "synth.bottom"))
    assert _layer_violations(_import_graph(package), side) == [
        "synth.bottom.b -> synth.top.a",
        "synth.top.a -> synth.bottom.b",
    ]
    # A package no layer names is reported, so a new package must be placed.
    assert _layer_violations(graph, (("synth",), ("synth.top",))) == [
        "synth.bottom: in no layer",
        "synth.bottom.b: in no layer",
        "synth.top.a -> synth.bottom.b",
    ]


def test_packages_import_only_the_layers_below() -> None:
    graph = _import_graph()
    # The graph sees the package imports the table is about.
    service = "purgatory_server._service"
    assert f"{service}.model.errors" in graph[f"{service}.core.registry"]
    assert _layer_violations(graph, LAYERS) == []


def test_types_follow_the_layers_too() -> None:
    """A lower layer names an upper one's class not even for the type checker: it says
    what it needs as a protocol of its own (``model.ended.Ended``, ``feed.OutcomeSink``)."""
    graph = _import_graph(typing=True)
    service = "purgatory_server._service"
    assert f"{service}.model.ended" in graph[f"{service}.telemetry.counters"]
    assert _layer_violations(graph, LAYERS) == []


def test_the_model_is_a_leaf() -> None:
    """The shared values import nothing of the service (the engine's clock at most)."""
    graph = _import_graph()
    model = "purgatory_server._service.model"
    outside = {
        dep
        for mod, deps in graph.items()
        if mod.startswith(model + ".")
        for dep in deps
        if not dep.startswith(model + ".")
    }
    assert outside == set()


def test_the_error_tree_is_one_module() -> None:
    """Every ServiceError is defined in ``model/errors.py`` (httpx keeps its tree so)."""
    errors = SERVICE / "model" / "errors.py"
    tree = ast.parse(errors.read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert {"ServiceError", "NotOwner", "SessionOverflow", "Overloaded"} <= names
    outside = sorted(
        f"{p.relative_to(PACKAGE).as_posix()}:{n.name}"
        for p in PACKAGE.rglob("*.py")
        if p != errors
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id in names for b in n.bases)
    )
    assert outside == []
