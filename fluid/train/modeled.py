"""A *modeled* trainable: a benchmark device for machines without GPUs.

It does a little real work each iteration (a small matrix product, so the process is alive and
measurable) and then sleeps for the rest of the time its current shape would take under the
runtime model of ``fluid.core.model``: ``t1 * f(w)``, slower by ``alpha ** (1/w - 1)`` when
packed on a share ``w < 1`` of a GPU and faster by ``w / beta ** (w - 1)`` as a gang of ``w``
GPUs. It checkpoints every iteration and restores like any Fluid trial, so resizes cost what
they cost in Ray (actor start, restore).

It says nothing about real GPU speed: it exists to measure Fluid's *scheduling* (packing,
gangs, resizes, Ray overheads) on logical GPUs, side by side with plain Tune.

Config keys (all under the trial's config):
    ``t1``: seconds per iteration on one GPU; ``iters``: iterations to run;
    ``alpha``, ``beta``: overheads (default 1); ``quality``: how good the config is (0..1]:
    the reported ``score`` approaches it along a saturating curve.

Example:
    >>> from fluid.train.modeled import modeled_trainable  # doctest: +SKIP
    >>> tune.run(modeled_trainable, config={"t1": tune.grid_search([1, 2, 4]), "iters": 5})
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time

import numpy as np

from fluid.core.model import slowdown
from fluid.shapes.bundles import ElasticTrainable, width_of

#: Size of the real work per iteration (a square float32 matrix product).
WORK_SIZE = 64


def score_at(quality: float, iteration: int, scale: float = 4.0) -> float:
    """The modeled learning curve: ``quality * (1 - exp(-iteration / scale))``."""
    return quality * (1.0 - math.exp(-iteration / scale))


def trial_width() -> float:
    """GPUs of the running trial's placement group (a share when below one)."""
    from ray import tune

    return width_of(tune.get_context().get_trial_resources().bundles)


def modeled_trainable(config: dict) -> None:
    """Run ``config["iters"]`` modeled iterations at the trial's current shape."""
    from ray import tune
    from ray.tune import Checkpoint

    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt:
        with ckpt.as_directory() as d, open(os.path.join(d, "modeled.json")) as f:
            start = json.load(f)["iteration"]
    width = trial_width()
    per_iter = float(config["t1"]) * (
        slowdown(width, config.get("alpha", 1.0), config.get("beta", 1.0)) if width > 0 else 1.0
    )
    rng = np.random.default_rng(start)
    a = rng.standard_normal((WORK_SIZE, WORK_SIZE), dtype=np.float32)
    for it in range(start + 1, int(config["iters"]) + 1):
        began = time.monotonic()
        a = np.tanh(a @ a.T / WORK_SIZE)  # the little real work
        time.sleep(max(0.0, per_iter - (time.monotonic() - began)))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "modeled.json"), "w") as f:
                json.dump({"iteration": it}, f)
            tune.report({"score": score_at(config.get("quality", 1.0), it), "gpus": width},
                        checkpoint=Checkpoint.from_directory(d))


# Gang-capable: the modeled speed-up of a gang needs no workers.
modeled_trainable.__mixins__ = (ElasticTrainable,)
