"""Tune trials that run Ray Train trainers, under FluidExecutor (logical GPUs, gloo).

Ray Train starts its workers in placement groups of its own. Fluid must count their GPUs, start
a trial only when its workers fit, and resize one by restarting it from Train's checkpoint.
"""

from __future__ import annotations

import pytest
import ray
from ray import tune
from ray.tune import Callback
from ray.util import placement_group_table

from fluid import FluidExecutor
from fluid.core import Tunables
from fluid.tune._records import PLACED
from tests.tune.ray_train_trainables import elastic_driver

GPUS = 4


@pytest.fixture(scope="module")
def ray8():
    """8 CPUs, 4 logical GPUs (Ray Train workers ask one GPU each and no CPU)."""
    ray.init(address="local", num_cpus=8, num_gpus=GPUS, include_dashboard=False,
             log_to_driver=False)
    yield
    ray.shutdown()


def gpus_asked() -> float:
    """GPUs of every placement group Ray holds or is waiting to place (Tune's and Train's)."""
    return sum(bundle.get("GPU", 0.0)
               for group in placement_group_table().values() if group["state"] != "REMOVED"
               for bundle in group["bundles"].values())


class RayView(Callback):
    """At every controller step: the GPUs Ray is asked for, and those in Fluid's plan."""

    def __init__(self, executor: FluidExecutor) -> None:
        self.executor = executor
        self.asked: list[float] = []
        self.planned: list[float] = []

    def on_step_end(self, iteration, trials, **info):
        self.asked.append(gpus_asked())
        placed = [r for r in self.executor.records.values() if r.phase in PLACED]
        self.planned.append(sum(r.width or 0.0 for r in placed))


@pytest.mark.slow
def test_train_trials_never_oversubscribe_and_a_resized_one_continues(ray8, tmp_path):
    # 3 trials that could use 4 GPUs each share 4 GPUs: one GPU each at first; idle GPUs
    # probe the long one as 2 workers once it reported (a resize: Tune pauses it after a
    # result, it restarts from Train's checkpoint at the new worker count). The short ones end
    # with their first result, 2 s after the long one's first (their epoch takes 3 s), so the
    # idle GPU goes to the long one first: a probe of a short one would be its last result.
    # A probe here costs an epoch of the long one's few (probe_min_eps 0: made whatever it
    # costs): what is tested is the resize, not when a probe pays.
    ex = FluidExecutor(eps=0.05, cpus_per_trial=1, cpus_per_worker=0.5,
                       tunables=Tunables(probe_min_eps=0.0))
    view = RayView(ex)
    results = tune.Tuner(
        elastic_driver,
        param_space={"epochs": tune.grid_search([1, 1, 8]),
                     "t": tune.sample_from(lambda spec: 1.0 if spec.config.epochs > 1 else 3.0)},
        tune_config=tune.TuneConfig(scheduler=ex),
        run_config=tune.RunConfig(storage_path=str(tmp_path), callbacks=[view], verbose=0),
    ).fit()
    assert not results.errors, results.errors
    assert view.asked and max(view.asked) <= GPUS, max(view.asked)
    assert max(view.planned) <= GPUS
    frames = sorted((r.metrics_dataframe for r in results), key=len)
    resized = []
    for df in frames:
        # each iteration once, and Train's epochs continue across restarts
        epochs = len(df)
        assert list(df["training_iteration"]) == list(range(1, epochs + 1)), df
        assert list(df["epoch"]) == list(range(1, epochs + 1)), df
        # every iteration ran with the workers Fluid gave the trial then
        assert list(df["workers"]) == list(df["fluid_gpus"]), df
        assert df["workers"].iloc[0] == 1  # unmeasured: one worker first
        rows = list(df.itertuples())
        for before, after in zip(rows[:-1], rows[1:], strict=True):
            if after.workers != before.workers:  # resized: Train resumed where Tune paused it
                assert after.resumed_at == before.epoch, df
                resized.append(len(df))
    assert [len(df) for df in frames] == [1, 1, 8]
    # the long one was resized (each resize of it before its last result shows a new count)
    assert resized and set(resized) == {8} and len(resized) <= ex.resizes, ex.plan_log
