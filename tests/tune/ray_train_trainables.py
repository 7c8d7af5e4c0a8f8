"""Ray Train trainers inside Tune trials, for the tests (logical GPUs, torch on the CPU, gloo).

``loop`` trains a tiny model on every worker, sleeps ``t / workers`` an epoch (a modeled
speed-up) and reports ``epoch``, ``workers`` and ``resumed_at`` (the epoch of Train's checkpoint
the run resumed from; 0 from scratch) with a checkpoint from rank 0.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import ray.train
import torch
from ray.train.torch import TorchConfig, TorchTrainer

import fluid.train as ft


def loop(config: dict) -> None:
    """One Ray Train worker's loop: ``epochs`` epochs, resumed from Train's checkpoint; each
    result also says which MPS daemon the worker was told at its first line to join (``mps``:
    the directory ``CUDA_MPS_PIPE_DIRECTORY`` leads to, "" without)."""
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    mps = os.path.realpath(pipe) if pipe else ""
    ctx = ray.train.get_context()
    workers = ctx.get_world_size()
    model = torch.nn.Linear(2, 1)
    if workers > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["epoch"]
    for epoch in range(start, config["epochs"]):
        time.sleep(config.get("t", 0.1) / workers)
        model(torch.ones(4, 2)).sum().backward()
        with tempfile.TemporaryDirectory() as d:
            own = None
            if ctx.get_world_rank() == 0:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch + 1}, f)
                own = ray.train.Checkpoint.from_directory(d)
            ray.train.report({"epoch": epoch + 1, "workers": workers, "resumed_at": start,
                              "mps": mps}, checkpoint=own)


def fit(config: dict) -> None:
    """The body of a Ray Train trial: a ``TorchTrainer`` sized and reported by Fluid."""
    TorchTrainer(loop, train_loop_config=config, scaling_config=ft.scaling_config(),
                 run_config=ft.run_config(), torch_config=TorchConfig(backend="gloo")).fit()


@ft.ray_train(num_workers=(1, 4))
def elastic_driver(config: dict) -> None:
    """A trial Fluid sizes between 1 and 4 workers."""
    fit(config)


@ft.ray_train(num_workers=2)
def two_workers(config: dict) -> None:
    """A trial of exactly 2 workers."""
    fit(config)
