"""User scripts as Ray's docs and other libraries write them, with no Fluid mark: the
trainables of the drop-in suite (``fluid.dropin.suite``) and of ``fluid bench dropin``.

Each trainable reports, besides its metric, what the suite compares:

* ``trial_gpus``: the GPUs of the placement group it runs in (``tune.get_context()``), and
  ``gpu_ids``: how many GPU ids Ray gave its process (none for a trial that asked for none).

Where a run counts the trials at once (``fluid bench dropin``), each trial keeps a marker
file in a shared folder while it runs and waits up to ``wait_s`` seconds at its start for
``expect`` markers (``rendezvous``), so that the count is of what the cluster holds at once,
not of how fast actors start.

The metric ``score`` is ``q * iteration``: deterministic, so the best config is the one with
the largest ``q`` under any scheduler that lets it run to its end.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

import ray
from ray import tune
from ray.tune import Checkpoint

from fluid.shapes.bundles import width_of


def rendezvous(config: dict) -> None:
    """Mark this trial running and wait (bounded by ``wait_s``) until ``expect`` trials are."""
    folder = config.get("rendezvous")
    if not folder:
        return
    open(os.path.join(folder, tune.get_context().get_trial_id()), "w").close()
    deadline = time.monotonic() + config.get("wait_s", 60.0)
    while (time.monotonic() < deadline
           and len(os.listdir(folder)) < config.get("expect", 1)):
        time.sleep(0.05)


def leave(config: dict) -> None:
    """Take this trial's marker away (it stops running)."""
    folder = config.get("rendezvous")
    if folder:
        marker = os.path.join(folder, tune.get_context().get_trial_id())
        if os.path.exists(marker):
            os.remove(marker)


def where(resources: Any = None) -> dict:
    """What Ray gave this trial: its placement group's GPUs (``resources``: a class
    trainable's ``trial_resources``) and its process's GPU ids."""
    resources = resources or tune.get_context().get_trial_resources()
    return {"trial_gpus": width_of(resources.bundles), "gpu_ids": len(ray.get_gpu_ids())}


def function_trial(config: dict) -> None:
    """A function trainable that checkpoints every iteration (Ray's docs' pattern)."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["it"]
    rendezvous(config)
    try:
        for it in range(start + 1, config.get("iters", 3) + 1):
            time.sleep(config.get("t", 0.2))
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"it": it}, f)
                tune.report({"score": config["q"] * it, **where()},
                            checkpoint=Checkpoint.from_directory(d))
    finally:
        leave(config)


def cpu_trial(config: dict) -> None:
    """A CPU trial (scikit-learn or XGBoost style): no checkpoint, Tune's default request."""
    rendezvous(config)
    try:
        for it in range(1, config.get("iters", 3) + 1):
            time.sleep(config.get("t", 0.2))
            tune.report({"score": config["q"] * it, **where()})
    finally:
        leave(config)


class ClassTrial(tune.Trainable):
    """The class API: ``setup``, ``step``, ``save_checkpoint``, ``load_checkpoint``."""

    def setup(self, config: dict) -> None:
        self.q, self.t, self.it = config["q"], config.get("t", 0.1), 0

    def step(self) -> dict:
        time.sleep(self.t)
        self.it += 1
        return {"score": self.q * self.it, **where(self.trial_resources)}

    def save_checkpoint(self, checkpoint_dir: str) -> dict:
        return {"it": self.it}

    def load_checkpoint(self, checkpoint: dict) -> None:
        self.it = checkpoint["it"]


def _train_loop(config: dict) -> None:
    """Every Ray Train worker: a tiny model, ``iters`` epochs, a report each."""
    import ray.train
    import torch

    net = torch.nn.Linear(4, 1)
    workers = ray.train.get_context().get_world_size()
    model = torch.nn.parallel.DistributedDataParallel(net) if workers > 1 else net
    for it in range(1, config.get("iters", 2) + 1):
        model(torch.ones(8, 4)).sum().backward()
        time.sleep(config.get("t", 0.2))
        ray.train.report({"score": config["q"] * it, "workers": workers})


def ray_train_trial(config: dict) -> None:
    """A Tune trial that runs a Ray Train trainer, unmarked: 2 workers of one GPU each."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trial_dir = tune.get_context().get_trial_dir()
    result = TorchTrainer(
        _train_loop, train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=2, use_gpu=True),
        run_config=RunConfig(storage_path=os.path.join(trial_dir, "train"), name="run"),
        torch_config=TorchConfig(backend="gloo"),
    ).fit()
    if result.error:
        raise result.error
    tune.report({"score": config["q"] * config.get("iters", 2), **where()})
