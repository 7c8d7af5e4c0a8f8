"""``fluid.sim.paper`` returns Markdown; the CLI writes it (fluid.sim never imports fluid.cli)."""

from __future__ import annotations

import ast
from pathlib import Path

import fluid.sim
from fluid.sim.paper import figure12, speedup_cell
from fluid.sim.results import Comparison, RunResult

SIM = Path(fluid.sim.__file__).parent


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_of_fluid_sim_imports_the_cli():
    files = sorted(SIM.rglob("*.py"))
    assert SIM / "paper.py" in files
    for f in files:
        bad = {m for m in _imports(f) if m == "fluid.cli" or m.startswith("fluid.cli.")}
        assert not bad, f"{f.relative_to(SIM.parent)} imports {bad}"


def _comp(tune: list[float], fluid: list[float]) -> Comparison:
    c = Comparison("grid", "synthetic", 8)
    for ex, times in (("tune", tune), ("fluid", fluid), ("fluid_static", tune)):
        for seed, t in enumerate(times):
            c.results.append(RunResult(ex, seed, t, t, 8 * t, 0.5))
    return c


def test_speedup_cell_shows_the_geometric_mean_and_interval():
    assert speedup_cell(_comp([10, 40], [5, 10]), "fluid", "tune", "makespan").startswith("2.83x [")
    assert speedup_cell(_comp([10, 20], [5, 10]), "fluid", "tune") == "2.00x [2.00, 2.00]"
    assert speedup_cell(_comp([10], [5]), "fluid", "tune") == "2.00x"  # one seed: no interval
    assert speedup_cell(_comp([], []), "fluid", "tune") == "-"


def test_tables_label_their_statistics():
    lines = figure12(lambda *a, **k: _comp([10, 20], [5, 10]))
    header = next(line for line in lines if line.startswith("| log-sd"))
    assert header.count("geo. mean [95% CI]") == 2
    assert "| 0.5 | 2.00x [2.00, 2.00] | 1.00x [1.00, 1.00] |" in lines
