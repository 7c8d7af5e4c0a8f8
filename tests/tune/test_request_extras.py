"""A request's accelerator type and custom resources stay in every shape Fluid gives the trial:
packed, on one GPU, as a gang (Ray places it only where they are)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from types import SimpleNamespace

import pytest
import ray
from ray import tune as ray_tune
from ray.tune import PlacementGroupFactory

from fluid import FluidExecutor, tune
from fluid.shapes.extras import extras_of
from fluid.tune import ElasticTrainable

ACCEL = "accelerator_type:A100"
REQUEST = PlacementGroupFactory([{"CPU": 0.1, "GPU": 1, ACCEL: 0.001, "licence": 1}])


@pytest.fixture(scope="module")
def ray_a100():
    ray.init(address="local", num_cpus=2, num_gpus=4, resources={ACCEL: 1, "licence": 8},
             include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def licensed(config: dict) -> None:
    """Reports, each iteration, its width and what its placement group holds beside GPUs;
    checkpoints every iteration (so Fluid may resize it)."""
    start = 0
    checkpoint = ray_tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "it.json")) as f:
            start = json.load(f)
    bundles = ray_tune.get_context().get_trial_resources().bundles
    width = sum(b.get("GPU", 0) for b in bundles)
    for it in range(start + 1, config["iters"] + 1):
        time.sleep(config["t"] / max(width, 1.0))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "it.json"), "w") as f:
                json.dump(it, f)
            ray_tune.report({"gpus": width, "licences": sum(b.get("licence", 0) for b in bundles),
                             "accelerated": all(b.get(ACCEL) for b in bundles if b.get("GPU"))},
                            checkpoint=ray_tune.Checkpoint.from_directory(d))


licensed.__mixins__ = (ElasticTrainable,)


def test_planner_shapes_keep_the_extras():
    from fluid.tune._cpus import CpuAccount
    from fluid.tune._records import TrialRecord, TrialStore

    rec = TrialRecord(SimpleNamespace(trial_id="t"), 0, 4, cpus=0.1,
                      extras=extras_of(REQUEST.bundles))
    account = CpuAccount(TrialStore(), None, 0.1)  # the planner's shapes
    for width in (0.5, 1.0, 3.0):
        bundles = account.shape(rec, width).bundles
        gpu_bundles = [b for b in bundles if b.get("GPU")]
        assert all(b[ACCEL] == 0.001 for b in gpu_bundles), bundles
        assert bundles[0]["licence"] == 1, bundles
        assert sum(b.get("licence", 0) for b in bundles) == 1  # once, with the trainable


@pytest.mark.slow
def test_packed_and_ganged_trials_keep_the_accelerator_and_licence(ray_a100, tmp_path):
    # resize_requests lets Fluid pack and gang a 1-GPU request; packing and gangs are free
    # here, so trials are packed, and the long one grows into a gang as the short ones end.
    ex = FluidExecutor(alpha=1.0, beta=1.0, resize_requests=True, cpus_per_trial=0.1,
                       cpus_per_worker=0.1, eps=0.05, verbose=False)
    analysis = tune.run(tune.with_resources(licensed, REQUEST),
                        config={"t": tune.grid_search([0.1] * 5 + [0.8]), "iters": 4},
                        trial_executor=ex, storage_path=str(tmp_path), verbose=0)
    widths = set()
    for trial in analysis.trials:
        assert trial.status == "TERMINATED"
        df = analysis.trial_dataframes[trial.trial_id]
        assert list(df["licences"]) == [1] * len(df) and all(df["accelerated"]), df
        widths.update(df["gpus"])
    assert any(w < 1 for w in widths) and any(w >= 2 for w in widths), widths
