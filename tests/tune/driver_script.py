"""A Tune driver under FluidExecutor, killed and restored by ``test_restore.py``.

``python -m tests.tune.driver_script STORAGE fresh|restore``
"""

from __future__ import annotations

import os
import sys

import ray
from ray.tune import RunConfig, TuneConfig, Tuner, grid_search

from fluid import FluidExecutor
from tests.tune.trainables import modeled

ITERS = 8


def main(storage: str, mode: str) -> None:
    ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False,
             log_to_driver=False)
    if mode == "fresh":
        tuner = Tuner(
            modeled,
            param_space={"t": grid_search([0.4, 0.4, 0.4, 1.2]), "iters": ITERS},
            tune_config=TuneConfig(
                scheduler=FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.3)
            ),
            run_config=RunConfig(name="exp", storage_path=storage, verbose=0),
        )
    else:
        tuner = Tuner.restore(os.path.join(storage, "exp"), trainable=modeled)
    tuner.fit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
