"""Layer contracts, read from the imports of every module (``ast``, nothing is imported):

* ``fluid.core`` imports numpy and the standard library only, ``fluid.shapes`` ``fluid.core``
  and the standard library only;
* nothing in ``fluid`` imports ``experiments`` (scripts that use fluid, never used by it);
* ``fluid.sim`` and ``fluid.dropin`` do not import ``fluid.cli`` (the command line sits on top
  of the simulator and of the drop-in suite);
* what runs inside a trial (``fluid.train``, ``fluid.gpu``) does not import the driver's layers
  (``fluid.tune``, ``fluid.sim``, ``fluid.cli``), and ``fluid.tune`` not the simulator's;
* Ray-private names and modules are imported by ``fluid.tune._ray_compat`` only, and Ray's
  private attributes are read or set there only (the overrides of Ray's private methods are checked
  in ``tests/tune/test_ray_compat.py``);
* no mixins: no ``self`` parameter annotated with a class (a helper class reaching into the
  state of the class it is mixed into), no class that inherits from a helper class of a sibling
  private module;
* no import cycle between modules of ``fluid`` (a package importing its own submodules aside),
  and no two modules of one name.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLUID = ROOT / "fluid"
# Known exceptions ``(module, import)``, each with a comment naming the change that removes it.
KNOWN: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (anywhere in the file)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


MODULES = {_module_name(p): p for p in sorted(FLUID.rglob("*.py"))}


def _known(name: str, imp: str) -> bool:
    return any(name == n and (imp == k or imp.startswith(k + ".")) for n, k in KNOWN)


def _violations(prefix: str, allowed) -> list[str]:  # noqa: ANN001
    bad = []
    for name, path in MODULES.items():
        if name != prefix and not name.startswith(prefix + "."):
            continue
        for imp in sorted(imports_of(path)):
            if not allowed(imp) and not _known(name, imp):
                bad.append(f"{name} imports {imp}")
    return bad


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_contract_reader_sees_relative_and_nested_imports() -> None:
    pkg = FLUID / "core" / "__init__.py"
    assert "fluid.core.model" in imports_of(pkg)
    assert "experiments.tasks" in imports_of(ROOT / "experiments" / "profiles.py")
    assert len(MODULES) > 50


def test_core_imports_numpy_and_the_standard_library_only() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    ok = lambda imp: _top(imp) in stdlib | {"numpy"} or imp.startswith("fluid.core")  # noqa: E731
    assert _violations("fluid.core", ok) == []


def test_shapes_import_core_and_the_standard_library_only() -> None:
    """Bundles are plain data: the driver (``fluid.tune``) and the trial (``fluid.train``)
    both read them, and neither layer may import the other."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    ok = lambda imp: (_top(imp) in stdlib or imp.startswith("fluid.core")  # noqa: E731
                      or imp.startswith("fluid.shapes"))
    assert _violations("fluid.shapes", ok) == []


def test_nothing_in_fluid_imports_experiments() -> None:
    assert _violations("fluid", lambda imp: _top(imp) != "experiments") == []


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("fluid.sim", "fluid.cli"),
        ("fluid.tune", "fluid.sim"),
        ("fluid.tune", "fluid.cli"),
        ("fluid.train", "fluid.tune"),
        ("fluid.train", "fluid.sim"),
        ("fluid.train", "fluid.cli"),
        ("fluid.gpu", "fluid.tune"),
        ("fluid.gpu", "fluid.sim"),
        ("fluid.dropin", "fluid.sim"),
        ("fluid.dropin", "fluid.cli"),
    ],
)
def test_lower_layers_do_not_import_upper_ones(layer: str, forbidden: str) -> None:
    ok = lambda imp: imp != forbidden and not imp.startswith(forbidden + ".")  # noqa: E731
    assert _violations(layer, ok) == []


def test_known_exceptions_are_still_needed() -> None:
    """A known exception that no longer happens must leave ``KNOWN`` (so it cannot creep back)."""
    for name, imp in KNOWN:
        assert imp in imports_of(MODULES[name]), f"{name} no longer imports {imp}: drop it"


def _ray_private_imports(path: Path) -> set[str]:
    out = set()
    for imp in imports_of(path):
        parts = imp.split(".")
        if parts[0] == "ray" and any(p == "experimental" or p.startswith("_")
                                     and not p.startswith("__") for p in parts):
            out.add(imp)
    return out


def test_ray_private_access_lives_in_ray_compat() -> None:
    assert _ray_private_imports(FLUID / "tune" / "_ray_compat.py")  # the reader sees them
    bad = sorted(
        f"{name} imports {imp}"
        for name, path in MODULES.items()
        if name != "fluid.tune._ray_compat"
        for imp in _ray_private_imports(path)
    )
    assert bad == []


def module_edges(path: Path) -> set[str]:
    """The modules of ``fluid`` that ``path`` imports by name: ``from pkg import mod`` is an
    edge to ``pkg.mod`` (its package is only being initialized), ``from mod import name`` one
    to ``mod``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.update([sub] if sub in MODULES else [base] if base in MODULES else [])
    return out


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "fluid.tune._ray_compat" in module_edges(FLUID / "tune" / "_executor.py")
    graph = {name: module_edges(path) for name, path in MODULES.items()}
    assert import_cycles(graph) == []


def _private_names_defined(tree: ast.Module) -> set[str]:
    """Every private name a module of ``fluid`` defines: its attributes (set on ``self`` or
    ``cls``), functions, classes, parameters and imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)  # (set on another object, it is that object's state)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return {n for n in names if n.startswith("_")}


#: Private attributes of the standard library that fluid reads, each with why.
STDLIB_PRIVATE = {
    "_SubParsersAction",  # argparse's type of add_subparsers(), for annotations
    "_replace",  # a NamedTuple's public copy-with-changes (underscored to spare field names)
}


def test_ray_private_attributes_are_read_in_ray_compat_only() -> None:
    # Fluid's own private names are those some module of fluid defines; any other private
    # attribute read outside _ray_compat is another library's (Ray's) state.
    own = set().union(*(_private_names_defined(tree) for tree in TREES.values())) | STDLIB_PRIVATE
    assert {"_trial_info", "_cumul_r", "_tune_controller"} - own  # the reader sees Ray's
    assert "_x" not in _private_names_defined(ast.parse("other._x = 1"))  # nor a write into it
    reads = sorted(
        f"{name}:{node.lineno} reads .{node.attr}"
        for name, tree in TREES.items() if name != "fluid.tune._ray_compat"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_")
        and not node.attr.startswith("__") and node.attr not in own
    )
    assert reads == []


def test_no_two_modules_share_a_name() -> None:
    """One name, one job: two modules of one name (``report.py`` in three layers) make the
    reader guess which is meant."""
    stems = [p.stem.lstrip("_") for p in MODULES.values() if p.name != "__init__.py"]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []


def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


TREES = _trees()


#: The one writer of a trial's lifecycle (``TrialStore.move`` is what it calls).
LIFECYCLE = "fluid.tune._lifecycle"


def _phase_moves(tree: ast.Module) -> list[int]:
    """Lines that move a trial's phase: a call of ``move`` on a store (``store.move``,
    ``self._store.move``)."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "move" and ast.unparse(node.func.value).endswith("store")]


def test_the_phase_reader_sees_every_store() -> None:
    tree = ast.parse("self.store.move(r, P.A)\nself._store.move(r, P.B)\npool.move(t, 1.0)\n"
                     "store.move(r, P.C)\n")
    assert _phase_moves(tree) == [1, 2, 4]


def test_one_module_moves_a_trials_phase() -> None:
    """The lifecycle has one writer: every other module asks it through a named event."""
    movers = {name: lines for name, tree in TREES.items()
              if name != LIFECYCLE and (lines := _phase_moves(tree))}
    assert movers == {}
    assert _phase_moves(TREES[LIFECYCLE])  # (the reader still finds the writer)


#: The modules that plan: they return decisions (``Decision`` values) and change no trial.
PLANNERS = ("fluid.tune._planner", "fluid.tune._resizes", "fluid.tune._probes",
            "fluid.tune._specs", "fluid.tune._cpus")


def _lifecycle_events() -> set[str]:
    """The names of ``Lifecycle``'s methods (its events, ``apply`` among them)."""
    cls = next(node for node in TREES[LIFECYCLE].body
               if isinstance(node, ast.ClassDef) and node.name == "Lifecycle")
    return {f.name for f in cls.body if isinstance(f, ast.FunctionDef)} - {"__init__"}


def test_the_planners_change_no_trial() -> None:
    """The planner computes decisions as values; only the executor applies them (and the
    lifecycle moves the phases): no planning module calls a lifecycle event."""
    events = _lifecycle_events()
    assert {"apply", "sized", "placed", "resize_asked"} <= events
    calls = {name: [node.lineno for node in ast.walk(TREES[name])
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in events
                    and "life" in ast.unparse(node.func.value)]
             for name in PLANNERS}
    assert {name: lines for name, lines in calls.items() if lines} == {}


def _annotated_self(tree: ast.Module) -> list[str]:
    return [f"{node.name} (line {node.lineno})" for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and any(a.arg == "self" and a.annotation is not None
                    for a in node.args.posonlyargs + node.args.args)]


def _sibling_private_names(name: str, tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names imported from private modules of the same package, and those modules' aliases."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    names, modules = set(), set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            if base.rpartition(".")[0] == package and base.rpartition(".")[2].startswith("_"):
                names.add(alias.asname or alias.name)  # from pkg._mod import Helper
            elif base == package and alias.name.startswith("_"):
                modules.add(alias.asname or alias.name)  # from pkg import _mod
    return names, modules


def _mixed_in_bases(name: str, tree: ast.Module) -> list[str]:
    names, modules = _sibling_private_names(name, tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            if (isinstance(base, ast.Name) and base.id in names) or (
                    isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name)
                    and base.value.id in modules):
                out.append(f"{node.name}({ast.unparse(base)})")
    return out


def test_no_mixins() -> None:
    annotated = {name: found for name, tree in TREES.items() if (found := _annotated_self(tree))}
    mixed = {name: found for name, tree in TREES.items()
             if (found := _mixed_in_bases(name, tree))}
    assert annotated == {} and mixed == {}


def test_the_mixin_reader_sees_both_patterns() -> None:
    code = ("from fluid.tune._specs import Helper\nfrom fluid.tune import _parts\n"
            "class A(Helper): pass\nclass B(_parts.Other): pass\n"
            "class C:\n    def m(self: A) -> None: ...\n")
    tree = ast.parse(code)
    assert _mixed_in_bases("fluid.tune._planner", tree) == ["A(Helper)", "B(_parts.Other)"]
    assert _annotated_self(tree) == ["m (line 6)"]
