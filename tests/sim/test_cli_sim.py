"""``fluid simulate`` and ``fluid bench sim``: the fields the issue asks for."""

from __future__ import annotations

import json

import pytest

from fluid.cli import main
from fluid.sim.stats import geomean

FIELDS = {"executor", "seed", "time_to_target", "makespan", "gpu_seconds", "gpu_utilization"}


def test_simulate_json_has_the_fields_and_speedups(capsys):
    code = main(["simulate", "--algorithm", "hyperband", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "2", "--samples", "9", "--max-t", "9", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    data = json.loads(out)
    assert set(data["results"][0]) >= FIELDS
    execs = {(r["executor"], r["seed"]) for r in data["results"]}
    for ex in ("tune", "resource_changing", "fluid_static", "fluid", "lower_bound"):
        assert {(ex, 0), (ex, 1)} <= execs
    assert {"fluid_vs_tune", "fluid_vs_resource_changing"} <= set(data["speedup"])
    assert set(data["speedup_ci95"]) == set(data["speedup_per_seed"]) == set(data["speedup"])
    for key, mean in data["speedup"].items():
        per_seed = data["speedup_per_seed"][key]
        assert set(per_seed) <= {"0", "1"}
        if mean is None:
            assert not per_seed and data["speedup_ci95"][key] is None
            continue
        ratios = list(per_seed.values())
        assert mean == pytest.approx(geomean(ratios))
        if len(ratios) == 2:
            low, high = data["speedup_ci95"][key]
            assert min(ratios) <= low <= mean <= high <= max(ratios)
    assert set(data["best_metric"]) == {"tune", "tune_tuned", "resource_changing",
                                        "fluid_static", "fluid_one_gpu", "fluid"}
    assert all(0 < v <= 1 for v in data["best_metric"].values())  # an accuracy-like metric
    assert data["resizes_per_trial"]["tune"] is None
    assert data["resizes_per_trial"]["fluid_static"] == 0
    assert data["restarts_per_trial"]["fluid"] >= 0
    tune = [r for r in data["results"] if r["executor"] == "tune"]
    bound = [r for r in data["results"] if r["executor"] == "lower_bound"]
    for t, b in zip(tune, bound, strict=True):
        assert b["makespan"] <= t["makespan"]
    assert "4/12" in err or "done" in err  # the progress bar
    # HyperBand on random configs has no searcher to limit: the careful user's Tune is Tune.
    tuned = [r for r in data["results"] if r["executor"] == "tune_tuned"]
    assert [{**r, "executor": "tune"} for r in tuned] == tune


def test_scoreboard_fields_and_baselines(capsys):
    code = main(["simulate", "--algorithm", "hyperopt", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "3", "--samples", "8", "--max-t", "9", "--target", "0.6", "--alpha", "1.05",
                 "--beta", "1.05", "--baselines", "tune,tune_tuned,fluid_one_gpu",
                 "--no-progress", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["executors"] == ["tune", "tune_tuned", "fluid_one_gpu", "fluid"]
    assert {r["executor"] for r in data["results"]} == {*data["executors"], "lower_bound"}
    for name, slow in (("fluid_vs_tune", "tune"), ("fluid_vs_tune_tuned", "tune_tuned"),
                       ("shape_gain", "fluid_one_gpu")):
        times = {(r["executor"], r["seed"]): r["time_to_target"] for r in data["results"]}
        expect = {str(s): times[(slow, s)] / times[("fluid", s)] for s in range(3)
                  if times[(slow, s)] and times[("fluid", s)]}
        assert data[f"{name}_per_seed"] == pytest.approx(expect)
        assert data[name] == data["speedup"][name]
        assert data[f"{name}_ci95"] == data["speedup_ci95"][name]
        if len(expect) > 1:
            low, high = data[f"{name}_ci95"]
            assert low <= data[name] <= high
    assert data["speedup"]["fluid_vs_resource_changing"] is None  # not run
    # HyperOpt is a model-based searcher: the careful user's Tune runs, with a concurrency
    # limit, and so differs from plain Tune.
    tune = [r["makespan"] for r in data["results"] if r["executor"] == "tune"]
    tuned = [r["makespan"] for r in data["results"] if r["executor"] == "tune_tuned"]
    assert tune != tuned
    assert data["shape_gain_per_seed"]  # the target was reached
    assert main(["simulate", "--algorithm", "grid", "--workload", "synthetic",
                 "--baselines", "tune,foo"]) == 2
    assert "--baselines" in capsys.readouterr().err


def test_simulate_table(capsys):
    assert main(["simulate", "--algorithm", "grid", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "1", "--trials", "6", "--max-t", "5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "median over seeds" in out and "fluid_vs_tune" in out
    assert "geometric mean over seeds" in out


def test_seeds_default_to_ten():
    from fluid.cli import build_parser

    args = build_parser().parse_args(["simulate", "--algorithm", "grid", "--workload", "cifar10"])
    assert args.seeds == 10 and args.no_profile is False


def test_paper_writes_only_its_section(tmp_path, monkeypatch):
    import fluid.sim.paper as paper
    from fluid.cli.simulate import write_paper

    monkeypatch.setattr(paper, "render", lambda seeds, quick, progress: "## Simulator\n\nnew\n")
    doc = tmp_path / "b.md"
    doc.write_text("# Benchmarks\n\n## Before\n\nkeep\n\n## Simulator\n\nold\n\n## After\n\nkeep too\n")
    write_paper(doc, seeds=2, progress_enabled=False)
    assert doc.read_text() == ("# Benchmarks\n\n## Before\n\nkeep\n\n## Simulator\n\nnew\n"
                               "## After\n\nkeep too\n")


def test_simulate_needs_an_algorithm(capsys):
    assert main(["simulate", "--workload", "cifar10", "--no-progress"]) == 2
    assert "--algorithm" in capsys.readouterr().err


def test_a_grid_is_sized_by_samples_or_the_size_is_refused_by_name(capsys):
    code = main(["simulate", "--algorithm", "grid", "--workload", "cifar10", "--gpus", "2",
                 "--seeds", "1", "--samples", "9", "--max-t", "2", "--baselines", "tune",
                 "--json", "--no-progress"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["trials"] for r in data["results"]} == {9}
    assert main(["simulate", "--algorithm", "grid", "--workload", "cifar10", "--samples", "10",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--samples" in err and "27" in err and "got 10" in err
    assert main(["simulate", "--algorithm", "asha", "--workload", "cifar10", "--samples", "0",
                 "--no-progress"]) == 2
    assert "--samples" in capsys.readouterr().err


def test_bench_sim_small(capsys):
    assert main(["bench", "sim", "--trials", "40", "--gpus", "16", "--executors", "tune,fluid",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["executor"] for r in rows] == ["tune", "fluid"]
    assert all(r["trials"] == 40 and r["wall_s"] > 0 for r in rows)


def test_bench_sim_profiles_where_the_time_goes(capsys):
    assert main(["bench", "sim", "--trials", "20", "--gpus", "8", "--executors", "fluid",
                 "--profile", "3", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    top = row["profile"]
    assert len(top) == 3 and all(f["function"].startswith("fluid/") for f in top)
    assert [f["own_s"] for f in top] == sorted((f["own_s"] for f in top), reverse=True)
    assert all(f["calls"] > 0 and f["cumulative_s"] >= f["own_s"] for f in top)
    assert main(["bench", "sim", "--trials", "20", "--profile", "0"]) == 2
    assert "--profile" in capsys.readouterr().err


def test_simulate_says_in_one_line_when_ray_is_too_old(monkeypatch, capsys):
    import ray

    monkeypatch.setattr(ray, "__version__", "2.55.1")
    assert main(["simulate", "--algorithm", "grid", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "found ray 2.55.1" in err[0] and "ray[tune]>=2.57" in err[0], err


def test_bench_sim_reports_what_fluids_restarts_bought_against_resizes_off(capsys):
    from fluid.cli.bench_sim import ITERATIONS
    from fluid.sim.experiment import run_experiment
    from fluid.sim.workloads import get_workload

    assert main(["bench", "sim", "--trials", "20", "--gpus", "8", "--executors", "tune,fluid",
                 "--seed", "3", "--seeds", "2", "--json"]) == 0
    tune, fluid = json.loads(capsys.readouterr().out)  # resizes off runs, but is no row
    assert tune["seeds"] == fluid["seeds"] == [3, 4] and "bought" not in tune
    workload = get_workload("synthetic", iter_time=10.0, spread=0.5, max_t=ITERATIONS)
    runs = {(ex, s): run_experiment("random", workload, ex, s, 8, samples=20)
            for ex in ("fluid", "fluid_static") for s in (3, 4)}
    on, off = [[runs[(ex, s)] for s in (3, 4)] for ex in ("fluid", "fluid_static")]
    assert fluid["makespan_s"] == pytest.approx((on[0].makespan + on[1].makespan) / 2)
    assert fluid["restarts"] == (on[0].restarts + on[1].restarts) / 2
    b = fluid["bought"]
    assert set(b) == {"against", "seeds", "restarts_per_trial", "makespan_ratio",
                      "makespan_ratio_ci", "makespan_seeds", "time_to_target_ratio",
                      "time_to_target_ratio_ci", "time_to_target_seeds"}
    assert b["against"] == "fluid_static" and b["seeds"] == [3, 4]
    assert b["restarts_per_trial"] == pytest.approx(
        sum(f.restarts - s.restarts for f, s in zip(on, off, strict=True)) / 40)
    assert b["restarts_per_trial"] > 0  # the resizes restarted trials
    makespans = [s.makespan / f.makespan for f, s in zip(on, off, strict=True)]
    assert b["makespan_ratio"] == pytest.approx(geomean(makespans))
    assert b["makespan_seeds"] == 2 and makespans[0] != makespans[1]
    low, high = b["makespan_ratio_ci"]
    assert min(makespans) <= low < high <= max(makespans)
    times = [s.time_to_target / f.time_to_target for f, s in zip(on, off, strict=True)
             if f.time_to_target and s.time_to_target]
    assert b["time_to_target_seeds"] == len(times) > 0
    assert b["time_to_target_ratio"] == pytest.approx(geomean(times))
    assert fluid["time_to_target_s"] == pytest.approx(
        sum(f.time_to_target for f in on) / 2)


def test_bench_sim_bought_on_one_seed_has_no_interval_and_seeds_are_checked(capsys):
    assert main(["bench", "sim", "--trials", "20", "--gpus", "8", "--executors",
                 "fluid_static,fluid"]) == 0
    out = capsys.readouterr().out
    assert "restarts per trial more than with resizes off bought" in out and "over 1 seed" in out
    assert main(["bench", "sim", "--trials", "20", "--gpus", "8", "--executors",
                 "fluid_static,fluid", "--json"]) == 0
    static, fluid = json.loads(capsys.readouterr().out)
    b = fluid["bought"]
    assert "bought" not in static and b["seeds"] == [0]
    assert b["makespan_ratio_ci"] is None and b["time_to_target_ratio_ci"] is None
    assert b["makespan_ratio"] == pytest.approx(static["makespan_s"] / fluid["makespan_s"])
    assert b["restarts_per_trial"] == pytest.approx(
        fluid["restarts_per_trial"] - static["restarts_per_trial"])
    assert main(["bench", "sim", "--trials", "20", "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err
