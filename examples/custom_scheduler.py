"""A custom Tune scheduler that declares TrialGroups for Fluid: one extra call.

"Rounds": every trial trains to a round's end; the better half goes on to the next round,
twice as long. Each round's trials form a TrialGroup, so Fluid sizes them together (long
survivors get more GPUs, short ones are packed). Run it with logical GPUs on any machine::

    python examples/custom_scheduler.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import ray
from ray import tune
from ray.tune import Checkpoint
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from fluid import FluidExecutor, TrialGroupMixin


class Rounds(TrialGroupMixin, FIFOScheduler):
    """Halve the population at every round boundary (2, 4, 8 ... iterations)."""

    def __init__(self, first_round: int = 2) -> None:
        super().__init__()
        self.until: dict[str, int] = {}
        self.first_round = first_round

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        self.until[trial.trial_id] = self.first_round
        # The one call: this trial belongs to the first round's group.
        self.new_trial_group([trial], until=self.first_round, name="round 1")

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:
        if result["training_iteration"] < self.until[trial.trial_id]:
            return TrialScheduler.CONTINUE
        if result["score"] < 0.5 * result["training_iteration"]:
            return TrialScheduler.STOP
        self.until[trial.trial_id] *= 2
        # The one call again: the survivor joins the next round's group.
        round_no = self.until[trial.trial_id].bit_length() - self.first_round.bit_length() + 1
        self.new_trial_group([trial], until=self.until[trial.trial_id], name=f"round {round_no}")
        return TrialScheduler.CONTINUE


def train(config: dict) -> None:
    start = 0
    if ckpt := tune.get_checkpoint():
        with ckpt.as_directory() as d, open(os.path.join(d, "it.json")) as f:
            start = json.load(f)
    for it in range(start + 1, 9):
        time.sleep(0.05)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "it.json"), "w") as f:
                json.dump(it, f)
            tune.report({"score": config["q"] * it}, checkpoint=Checkpoint.from_directory(d))


if __name__ == "__main__":
    ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False)
    executor = FluidExecutor(Rounds(), cpus_per_trial=0.1)
    tuner = tune.Tuner(
        train,
        param_space={"q": tune.grid_search([0.2, 0.4, 0.6, 0.8, 1.0, 1.2])},
        tune_config=tune.TuneConfig(scheduler=executor, metric="score", mode="max"),
    )
    best = tuner.fit().get_best_result()
    print("best config:", best.config, "score:", best.metrics["score"])
    for group in executor.groups:
        print(f"TrialGroup {group.name!r}: {len(group.trials)} trials, until {group.until}")
