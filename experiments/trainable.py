"""The elastic Tune trainable of a task: one training loop for every shape Fluid gives a trial.

``make_trainable(task, ...)`` returns ``fluid.train.elastic(loop)``: the trial runs the loop in
its own process (a packed GPU share or one whole GPU) or on a ``torch.distributed`` gang, and
Fluid may resize it between iterations. Each iteration is one ``task.train_one_iteration``
(an epoch, or ``max_batches`` batches) followed by ``task.evaluate`` on rank 0, and one
``fluid.train.report`` with a checkpoint (model, optimizer, loader position, RNG states), so a
resize loses no progress and repeats no iteration.

Besides the task's metrics every result carries what the run record needs:

* ``world_size``: data-parallel workers the iteration ran on;
* ``gpu_share``: the GPU fraction each process held (``< 1`` packed, ``1`` whole GPUs);
* ``ray_gpu_ids``: the GPU ids Ray gave the trial process (``ray.get_gpu_ids()``, as strings);
* ``iteration_s``: seconds of training + evaluation in this iteration (rank 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

import fluid.train as ft
from experiments.tasks import Task, get_task

__all__ = ["GanReplicas", "make_trainable", "trial_config"]


class GanReplicas(nn.Module):
    """DCGAN view for a gang: ``generator`` and ``discriminator`` each wrapped by DDP.

    A GAN step runs several forwards per backward, so the two networks are wrapped separately
    (see ``experiments.tasks.dcgan``); the underlying model stays available as ``base`` for
    checkpoints, which therefore load at any width.
    """

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.base = base
        self.generator = ft.prepare_model(base.generator)
        self.discriminator = ft.prepare_model(base.discriminator)
        self.nz = getattr(base, "nz", None)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Generated images for noise ``z``."""
        return self.generator(z)


def trial_config(task: Task, config: dict[str, Any], train_ds: Any, smoke: bool) -> dict[str, Any]:
    """The full config a trial trains with: task defaults, the sampled config, data-derived
    settings (e.g. the vocabulary size) and, in smoke mode, the task's shrunken sizes."""
    full = {**task.default_config, **config, **task.data_config(train_ds)}
    return task.smoke_config(full) if smoke else full


def _prepare(task: Task, model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """``(model to train with, plain model to checkpoint)`` for this worker's width."""
    if task.name == "dcgan" and ft.get_context().world_size > 1:
        model = model.to(ft.get_context().device)
        return GanReplicas(model), model
    prepared = ft.prepare_model(model)
    return prepared, ft.unwrap_model(prepared)


def _assigned_gpu_ids() -> list[str]:
    """The GPUs Ray assigned this process ([] outside a Ray worker, as in unit tests)."""
    import ray

    try:
        return [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 -- outside a Ray worker
        return []


def make_trainable(
    task: Task | str,
    *,
    data_dir: str | Path | None = None,
    smoke: bool = False,
    max_iterations: int = 1_000_000,
    max_batches: int | None = None,
    eval_batches: int | None = None,
    threads: int = 1,
) -> Callable[[dict[str, Any]], None]:
    """An elastic Tune function trainable that trains ``task`` with the trial's config.

    Args:
        task: a :class:`~experiments.tasks.Task` or its name.
        data_dir: where the task's data lives (``None`` with ``smoke``: synthetic data).
        smoke: use the task's smoke datasets and ``smoke_config`` (tiny models).
        max_iterations: the loop returns after this many iterations (Tune's stop criterion
            normally ends the trial first).
        max_batches: train at most this many global batches per iteration (``None``: an epoch).
        eval_batches: evaluate on at most this many batches (``None``: the whole split).
        threads: ``torch.set_num_threads`` in every worker (1 on a shared CPU).
    """
    task = get_task(task)
    name = task.name

    def loop(config: dict[str, Any]) -> None:
        from experiments.tasks import get_task as _get

        t = _get(name)
        torch.set_num_threads(threads)
        ctx = ft.get_context()
        train_ds, val_ds = t.build_datasets(data_dir, smoke)
        cfg = trial_config(t, dict(config), train_ds, smoke)
        torch.manual_seed(int(cfg.get("seed", 0)))
        model, plain = _prepare(t, t.build_model(cfg))
        optimizer = t.build_optimizer(plain, cfg)
        train_loader = ft.prepare_data_loader(t.build_loader(train_ds, cfg, train=True))
        val_loader = t.build_loader(val_ds, cfg, train=False)
        state = ft.load_checkpoint(model=plain, optimizer=optimizer, loader=train_loader)
        iteration = int(state["iteration"]) if state else 0
        gpu_ids = _assigned_gpu_ids()
        while iteration < max_iterations:
            t0 = time.perf_counter()
            metrics = t.train_one_iteration(
                model, optimizer, train_loader, ctx.device, cfg, max_batches=max_batches
            )
            if ctx.rank == 0:  # the plain model: a DDP forward would wait for the other ranks
                metrics |= t.evaluate(plain, val_loader, ctx.device, cfg, max_batches=eval_batches)
            iteration += 1
            metrics.update(world_size=ctx.world_size, gpu_share=ctx.gpu_share,
                           ray_gpu_ids=",".join(gpu_ids), iteration_s=time.perf_counter() - t0)
            checkpoint = ft.save_checkpoint(
                model=plain, optimizer=optimizer, loader=train_loader, iteration=iteration
            )
            ft.report(metrics, checkpoint=checkpoint)

    loop.__name__ = loop.__qualname__ = f"{name}_loop"
    return ft.elastic(loop)
