"""A Tune driver under FluidExecutor, killed and restored by ``test_restore.py``.

``python -m tests.tune.driver_script STORAGE fresh|restore [grid|hyperopt] [fluid|tune]``

``grid``: 4 grid trials, FIFO. ``hyperopt``: HyperOpt + Fluid's ASHA, ``SAMPLES`` trials (a
model-based searcher, whose suggestions Fluid limits by the trials in flight). ``tune``: the
grid under plain Tune (no ``FluidExecutor``), for comparison. Every driver's callback writes
what it was handed to ``seen-<pid>.jsonl`` (``SeenFile``).
"""

from __future__ import annotations

import json
import os
import sys

import ray
from ray.tune import Callback, RunConfig, TuneConfig, Tuner, grid_search

from fluid import FluidExecutor, tune
from tests.tune.trainables import modeled

ITERS = 8
#: Iterations and trials of the searcher experiments.
SEARCH_ITERS, SAMPLES = 6, 12
#: Written at the experiment's end: ``{trial_id: Tune status}``.
STATUS_FILE = "statuses.json"


class SeenFile(Callback):
    """Writes each ``(trial id, iteration)`` a callback is handed, one file per driver."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict,
                        **info) -> None:
        path = os.path.join(self.directory, f"seen-{os.getpid()}.jsonl")
        with open(path, "a") as f:
            f.write(json.dumps([trial.trial_id, result["training_iteration"]]) + "\n")


class StatusFile(Callback):
    """Writes every trial's final status to ``STATUS_FILE`` in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def on_experiment_end(self, trials: list, **info) -> None:
        with open(os.path.join(self.directory, STATUS_FILE), "w") as f:
            json.dump({t.trial_id: t.status for t in trials}, f)


def _hyperopt() -> tuple[dict, TuneConfig]:
    """The param space and TuneConfig of the HyperOpt + Fluid's ASHA experiment."""
    from ray.tune.search.hyperopt import HyperOptSearch

    from fluid.schedulers import ASHAScheduler

    base = ASHAScheduler(max_t=SEARCH_ITERS, grace_period=2, reduction_factor=2)
    space = {"q": tune.uniform(0.5, 2.0), "t": 0.5, "iters": SEARCH_ITERS}
    config = TuneConfig(metric="score", mode="max", num_samples=SAMPLES,
                        search_alg=HyperOptSearch(random_state_seed=0, n_initial_points=4),
                        scheduler=FluidExecutor(base, cpus_per_trial=0.1, cpus_per_worker=0.1,
                                                eps=0.3))
    return space, config


def main(storage: str, mode: str, searcher: str = "grid", executor: str = "fluid") -> None:
    ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False,
             log_to_driver=False)
    if mode == "fresh":
        if searcher == "grid":
            space = {"t": grid_search([0.4, 0.4, 0.4, 1.2]), "iters": ITERS}
            config = TuneConfig(
                scheduler=FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.3)
                if executor == "fluid" else None)
        else:
            space, config = _hyperopt()
        tuner = Tuner(modeled, param_space=space, tune_config=config,
                      run_config=RunConfig(name="exp", storage_path=storage, verbose=0,
                                           callbacks=[StatusFile(storage),
                                                      SeenFile(storage)]))
    else:
        tuner = Tuner.restore(os.path.join(storage, "exp"), trainable=modeled)
    results = tuner.fit()
    assert not results.errors, results.errors


if __name__ == "__main__":
    main(*sys.argv[1:])
