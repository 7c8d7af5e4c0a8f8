"""Small trainables for the Ray Tune adapter tests (logical GPUs, no real work)."""

from __future__ import annotations

import json
import os
import tempfile
import time

from ray import tune
from ray.tune import Checkpoint

from fluid.train.modeled import trial_width
from fluid.tune import ElasticTrainable


def modeled(config: dict) -> None:
    """Sleeps ``t / gpus`` an iteration (``t`` when packed); checkpoints every iteration.

    The config may also be nested under ``cfg`` (to grid-search whole configs).

    ``score`` grows with the iteration and ``config["q"]`` so algorithms have a metric.
    ``fail_at``: raise once at that iteration (a marker file makes it once per trial).
    ``oom_below``: raise torch's CUDA out-of-memory error when given less GPU than that.

    Every result says where this run of the trial started: ``restored_from``, the id of the
    trial that wrote the checkpoint it restored (``None``: from scratch; another trial's: a
    PBT exploit), and ``restored_at``, that checkpoint's iteration.
    """
    config = config.get("cfg", config)
    start, owner = 0, None
    ckpt = tune.get_checkpoint()
    if ckpt:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            state = json.load(f)
        start, owner = state["it"], state.get("owner")
    gpus = trial_width()
    if gpus < config.get("oom_below", 0):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; fake)")
    for it in range(start + 1, int(config.get("iters", 4)) + 1):
        time.sleep(config.get("t", 0.1) / max(gpus, 1.0))
        fail_at = config.get("fail_at")
        marker = os.path.join(tempfile.gettempdir(), f"fluid-fail-{config.get('tag', '')}")
        if fail_at == it and (config.get("always") or not os.path.exists(marker)):
            open(marker, "w").close()
            raise RuntimeError(f"injected failure at iteration {it}")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"it": it, "owner": tune.get_context().get_trial_id()}, f)
            metrics = {"it": it, "gpus": gpus, "score": config.get("q", 1.0) * it,
                       "restored_from": owner, "restored_at": start}
            if "peak_gb" in config:  # an injected peak GPU memory, as fluid.train reports it
                metrics["fluid_peak_gpu_memory"] = int(config["peak_gb"] * 2**30)
            tune.report(
                metrics,
                checkpoint=Checkpoint.from_directory(d),
            )


modeled.__mixins__ = (ElasticTrainable,)


def plain(config: dict) -> None:
    """An ordinary Tune function trainable: no Fluid imports; checkpoints every iteration."""
    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["it"]
    for it in range(start + 1, 9):
        time.sleep(0.05)
        acc = 1.0 - abs(config["lr"] - 0.01) - 0.5 / it
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"it": it}, f)
            gpus = trial_width()
            tune.report({"acc": acc, "gpus": gpus}, checkpoint=Checkpoint.from_directory(d))
