"""``fluid simulate`` and ``fluid bench sim``: the fields the issue asks for."""

from __future__ import annotations

import json

from fluid.cli import main

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
    tune = [r for r in data["results"] if r["executor"] == "tune"]
    bound = [r for r in data["results"] if r["executor"] == "lower_bound"]
    for t, b in zip(tune, bound, strict=True):
        assert b["makespan"] <= t["makespan"]
    assert "4/8" in err or "done" in err  # the progress bar


def test_simulate_table(capsys):
    assert main(["simulate", "--algorithm", "grid", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "1", "--trials", "6", "--max-t", "5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "median over seeds" in out and "fluid_vs_tune" in out


def test_simulate_needs_an_algorithm(capsys):
    assert main(["simulate", "--workload", "cifar10", "--no-progress"]) == 2
    assert "--algorithm" in capsys.readouterr().err


def test_bench_sim_small(capsys):
    assert main(["bench", "sim", "--trials", "40", "--gpus", "16", "--executors", "tune,fluid",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["executor"] for r in rows] == ["tune", "fluid"]
    assert all(r["trials"] == 40 and r["wall_s"] > 0 for r in rows)
