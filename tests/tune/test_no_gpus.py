"""A cluster without GPUs: Fluid waits for GPU nodes (saying so in one line), or refuses it
with a clear error when asked to (``wait_for_nodes=False``); trials that ask for no GPU run
on it as under plain Tune."""

import logging

import pytest
import ray

from fluid import FluidExecutor, tune
from tests.tune.trainables import modeled


@pytest.fixture(scope="module")
def ray_cpu_only():
    ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_cluster_without_gpus_is_refused_when_asked(ray_cpu_only, tmp_path):
    with pytest.raises(Exception, match="has no GPUs"):
        tune.run(modeled, trial_executor=FluidExecutor(cpus_per_trial=0.1, wait_for_nodes=False),
                 verbose=0, storage_path=str(tmp_path))


def test_cluster_without_gpus_waits_for_them(ray_cpu_only, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="fluid"):
        analysis = tune.run(modeled, config={"n": tune.grid_search([1, 2])},
                            trial_executor=FluidExecutor(cpus_per_trial=0.1), verbose=0,
                            storage_path=str(tmp_path), time_budget_s=8)
    said = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert said == ["Fluid: waiting for GPU nodes to join: the Ray cluster has no GPU yet; "
                    "trials start as GPUs come"]
    assert all(not t.last_result.get("training_iteration") for t in analysis.trials)


def test_trials_without_gpu_run_on_a_cluster_without_gpus(ray_cpu_only, tmp_path, caplog):
    from fluid.dropin.scripts import cpu_trial

    with caplog.at_level(logging.WARNING, logger="fluid"):
        analysis = tune.run(cpu_trial, config={"q": tune.grid_search([0.5, 1.0]), "t": 0.1},
                            trial_executor=FluidExecutor(wait_for_nodes=False), verbose=0,
                            storage_path=str(tmp_path), time_budget_s=120)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 2
    assert {t.last_result["fluid_shape"] for t in analysis.trials} == {"no GPU"}
    assert not [r for r in caplog.records if "waiting for" in r.getMessage()]
