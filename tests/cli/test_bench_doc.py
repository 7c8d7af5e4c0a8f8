"""``fluid bench doc``: docs/benchmarks.md from the benchmarks' JSON, each table with its
command and commit, what is not run yet named; ``--run`` runs what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fluid.cli import bench_doc
from fluid.cli.benchmarks_page import BENCHMARKS, Results, page

from .running import run_cli


def _cell(tune: float, fluid: float, seeds: int = 3) -> dict:
    """A ``fluid simulate --json`` result with ``tune`` and ``fluid`` times on each seed."""
    rows = [{"executor": ex, "seed": s, "time_to_target": t * (1 + s / 10)}
            for s in range(seeds) for ex, t in (("tune", tune), ("fluid", fluid),
                                               ("fluid_one_gpu", tune), ("lower_bound", 10.0))]
    return {"results": rows, "fluid_vs_tune": tune / fluid, "fluid_vs_tune_ci95": [1.0, 2.0],
            "shape_gain": tune / fluid, "shape_gain_ci95": [1.1, 1.9]}


def _write(directory: Path, name: str, output: object, commit: str = "abc1234") -> None:
    record = {"command": "fluid " + " ".join(BENCHMARKS[name]), "commit": commit,
              "output": output}
    (directory / f"{name}.json").write_text(json.dumps(record))


def test_each_table_names_its_command_and_commit_and_what_is_not_run(tmp_path: Path) -> None:
    _write(tmp_path, "fig7-cifar10-syncbohb", _cell(300.0, 200.0))
    _write(tmp_path, "fig7-dcgan-asha", _cell(100.0, 100.0), commit="def5678")
    text = page(Results(tmp_path))
    row = "| cifar10 syncbohb | 330 | - | 330 | 220 | 1.50x [1.00, 2.00] | - | 1.50x [1.10, 1.90] |"
    assert row in text
    assert "| wlm bohb | (not run) |" in text
    assert "at `abc1234` (1 of 15), `def5678` (1 of 15)." in text
    assert "Not run yet: fig7-cifar10-hyperband," in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("|")) <= 100
    assert text.startswith("# Benchmarks\n\nWritten by `fluid bench doc")


def test_no_profile_and_the_ceiling_pair_cells_seed_by_seed(tmp_path: Path) -> None:
    _write(tmp_path, "cifar10-asha-h100", _cell(200.0, 100.0))
    _write(tmp_path, "noprofile-asha-h100", _cell(200.0, 150.0))
    _write(tmp_path, "ceiling-asha-h100", _cell(100.0, 50.0))  # its fluid_one_gpu: 100 s
    text = page(Results(tmp_path))
    # no profile over profiled: 150 / 100 on every seed; the ceiling: 200 / 100
    assert "| cifar10 asha, h100 | 110 | 165 | 1.50x [1.50, 1.50] |" in text
    assert "| cifar10 asha, h100 | 220 | 110 | 11 | 2.00x [2.00, 2.00] |" in text


def test_grid_rows_show_makespans_and_unprofiled_figure_7_rows_pair_with_profiled(
        tmp_path: Path) -> None:
    grid = _cell(100.0, 80.0)
    for row in grid["results"]:
        row["makespan"] = {"tune": 900.0, "fluid": 600.0, "fluid_one_gpu": 900.0,
                           "lower_bound": 500.0}[row["executor"]]
    grid["speedup"] = {"fluid_vs_tune_makespan": 1.5, "fluid_vs_tune": 1.25,
                       "shape_gain_makespan": 1.5, "shape_gain": 1.25}
    grid["speedup_ci95"] = {k: [1.0, 2.0] for k in grid["speedup"]}
    _write(tmp_path, "grid-27-h100", grid)
    _write(tmp_path, "fig7-wlm-asha", _cell(200.0, 100.0))
    _write(tmp_path, "noprofile-fig7-wlm-asha", _cell(200.0, 200.0))
    text = page(Results(tmp_path))
    assert ("| 27 trials, h100 | 900 | 600 | 500 | 1.50x [1.00, 2.00] | 1.25x [1.00, 2.00] | "
            "1.50x [1.00, 2.00] | 1.25x [1.00, 2.00] |") in text
    assert "| 9 trials, rtx6000 | (not run) |" in text
    assert "| wlm asha | 110 | 220 | 2.00x [2.00, 2.00] | 2.00x [1.00, 2.00] | 1.00x [1.00, 2.00] | - |" in text


def test_the_paper_section_keeps_its_own_heading_and_no_second_figure_7(tmp_path: Path) -> None:
    _write(tmp_path, "paper", {"markdown": "# Benchmarks\n\n## Simulator\n\n### Table 2\nrow\n"
                                           "### Figure 7: time to target\nseven\n"
                                           "### Figure 11: grid search\neleven\n"})
    text = page(Results(tmp_path))
    assert "## The paper's evaluation, simulated" in text and "### Table 2\nrow" in text
    assert "seven" not in text and "### Figure 11: grid search\neleven" in text  # one Figure 7
    assert "## Simulator\n" not in text and text.count("# Benchmarks") == 1


def test_run_writes_each_missing_result_with_its_command_and_commit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said: list[str] = []
    plan = {"plan": ("plan", "--example", "figure5", "--json")}
    bench_doc.run_missing(tmp_path / "res", said.append, 1, plan)
    assert said == ["[1/1] plan: fluid plan --example figure5 --json"]
    record = json.loads((tmp_path / "res" / "plan.json").read_text())
    assert record["command"] == "fluid plan --example figure5 --json"
    assert len(record["commit"]) >= 7 and "widths" in record["output"]
    bench_doc.run_missing(tmp_path / "res", said.append, 1, plan)
    assert len(said) == 1  # kept: not run again
    out = tmp_path / "page.md"
    code, printed, _ = run_cli(capsys, "bench", "doc", str(tmp_path / "res"), "--out", str(out))
    assert code == 0 and out.read_text().startswith("# Benchmarks") and f"{out}:" in printed


def test_a_results_directory_that_does_not_exist_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "bench", "doc", str(tmp_path / "none"), "--out",
                           str(tmp_path / "page.md"))
    assert code == 2 and "RESULTS_DIR" in err and "--run makes it" in err


def test_jobs_below_one_are_refused_naming_the_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "bench", "doc", str(tmp_path), "--run", "--jobs", "0")
    assert code == 2 and "--jobs must be at least 1, got 0" in err


def test_restarts_section_shows_what_fluids_restarts_bought(tmp_path: Path) -> None:
    bought = {"against": "fluid_static", "seeds": list(range(10)), "restarts_per_trial": 0.6,
              "makespan_ratio": 1.37, "makespan_ratio_ci": [1.3, 1.45], "makespan_seeds": 10,
              "time_to_target_ratio": 0.96, "time_to_target_ratio_ci": [0.9, 1.02],
              "time_to_target_seeds": 8}
    assert "Not run yet: sim-restarts." in page(Results(tmp_path))
    _write(tmp_path, "sim-restarts", [{"executor": "fluid", "trials": 1000, "gpus": 512,
                                       "restarts_per_trial": 0.613, "bought": bought}])
    text = page(Results(tmp_path))
    assert "## Restarts and what they bought" in text
    assert ("| 1,000 | 512 | 10 | 0.613 | 0.600 | 1.37x [1.30, 1.45] | "
            "0.96x [0.90, 1.02] (over 8 seeds) |") in text
    assert "`fluid bench sim --executors fluid --seeds 10 --json`, at `abc1234`." in text


def test_load_section_has_a_row_for_each_cluster_run(tmp_path: Path) -> None:
    def load(nodes: int, hooks_ms: float) -> dict:
        return {"trials": 500, "nodes": nodes, "tune": {"wall_clock": 700.0},
                "fluid": {"wall_clock": 690.0, "vs_tune": 0.99, "hook_ms_per_trial": hooks_ms,
                          "resizes_per_trial": 0.0},
                "driver_peak_rss_mb": {"after_fluid": 420.0}}

    _write(tmp_path, "load", load(1, 4.5))
    text = page(Results(tmp_path))
    assert "| 500 | 1 | 700.0 | 690.0 | 0.99 | 4.50 | 0.000 | 420 |" in text
    assert "Not run yet: load-nodes4." in text
    _write(tmp_path, "load-nodes4", load(4, 4.8))
    text = page(Results(tmp_path))
    assert "| 500 | 4 | 700.0 | 690.0 | 0.99 | 4.80 | 0.000 | 420 |" in text
    assert "`fluid bench load --trials 500 --nodes 4 --json`, at `abc1234`." in text
