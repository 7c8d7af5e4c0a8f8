"""``fluid simulate --replay`` on a Ray Tune results directory produced here by real Tune."""

from __future__ import annotations

import json
import time

import pytest

from fluid.cli import main
from fluid.sim.replay import read_results, replay

ITERS = {0.2: 3, 0.5: 5, 0.9: 4}


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    import ray
    from ray import tune

    def trainable(config):
        for i in range(ITERS[config["q"]]):
            time.sleep(0.01)
            tune.report({"acc": config["q"] * (i + 1) / 5})

    path = tmp_path_factory.mktemp("ray_results")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        tune.run(trainable, config={"q": tune.grid_search(list(ITERS))}, storage_path=str(path),
                 name="replayed", verbose=0, resources_per_trial={"cpu": 1})
    finally:
        ray.shutdown()
    return path / "replayed"


def test_read_results(results_dir):
    trials = read_results(results_dir, "acc")
    assert sorted(len(t.metrics) for t in trials) == sorted(ITERS.values())
    by_q = {t.config["q"]: t for t in trials}
    assert by_q[0.9].metrics[-1] == pytest.approx(0.9 * 4 / 5)
    assert all(t > 0 for tr in trials for t in tr.iteration_times)


def test_replay_runs_the_same_work_under_every_executor(results_dir):
    comp, workload = replay(results_dir, 2, metric="acc", mode="max", target=0.7)
    assert workload.max_t == 5
    for r in comp.results:
        assert r.trials == 3
    tune = comp.of("tune")[0]
    assert tune.time_to_target is not None and not tune.stalled
    assert comp.speedups()["fluid_vs_tune"] is not None


def test_cli_replay_json(results_dir, capsys):
    assert main(["simulate", "--replay", str(results_dir), "--gpus", "2", "--metric", "acc",
                 "--json", "--seeds", "1", "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"fluid_vs_tune", "fluid_vs_resource_changing"} <= set(data["speedup"])
    assert data["executors"] == ["tune", "tune_tuned", "resource_changing", "fluid_static",
                                 "fluid_one_gpu", "fluid"]
    assert len(data["results"]) == 7  # 6 executors and the lower bound
    # A replay's fixed trial list has no searcher to limit: the careful user's Tune is Tune.
    rows = {r["executor"]: r for r in data["results"]}
    assert {**rows["tune_tuned"], "executor": "tune"} == rows["tune"]


def test_replay_of_a_missing_directory(tmp_path, capsys):
    assert main(["simulate", "--replay", str(tmp_path / "nope"), "--no-progress"]) == 2
    assert "nope" in capsys.readouterr().err
