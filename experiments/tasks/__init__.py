"""The paper's three tuning tasks, as framework-independent bundles of pure-torch pieces.

Typical use by a training loop (single process or inside a distributed worker)::

    task = TASKS["cifar10"]
    train_ds, val_ds = task.build_datasets(data_dir, smoke)
    config = {**config, **task.data_config(train_ds)}
    if smoke:
        config = task.smoke_config(config)
    model = task.build_model(config).to(device)
    optimizer = task.build_optimizer(model, config)
    train_loader = task.build_loader(train_ds, config, train=True)
    val_loader = task.build_loader(val_ds, config, train=False)
    for _ in range(iterations):
        metrics = task.train_one_iteration(model, optimizer, train_loader, device, config)
        metrics |= task.evaluate(model, val_loader, device, config)
        # metrics[task.metric] is the tuning objective

``train_one_iteration(model, optimizer, loader, device, config, max_batches=None)`` runs one
iteration (an epoch over ``loader``, or ``max_batches`` batches) and ``evaluate(model, loader,
device, config, max_batches=None)`` one validation pass; both return ``dict[str, float]``.
Models may be wrapped (``DistributedDataParallel``): the functions only call the wrapper or,
for the GAN, its ``generator``/``discriminator`` attributes.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from . import cifar10, dcgan, wlm

__all__ = ["TASKS", "Task", "count_flops_and_params", "get_task"]


@dataclass(frozen=True)
class Task:
    """A tuning workload: model, data, search space, objective and per-iteration step."""

    name: str
    metric: str
    mode: str  # "max" or "min", as in ray.tune
    target: float
    search_space: dict[str, Any]
    default_config: dict[str, Any]
    iteration: str  # what one train_one_iteration call covers (human-readable)
    train_samples: int  # full training set size: images (cifar10, dcgan), tokens (wlm)
    build_model: Callable[[Mapping[str, Any]], nn.Module]
    build_optimizer: Callable[[nn.Module, Mapping[str, Any]], torch.optim.Optimizer]
    build_datasets: Callable[..., tuple[Any, Any]]
    build_loader: Callable[..., torch.utils.data.DataLoader]
    data_config: Callable[[Any], dict[str, Any]]
    smoke_config: Callable[[Mapping[str, Any]], dict[str, Any]]
    train_one_iteration: Callable[..., dict[str, float]]
    evaluate: Callable[..., dict[str, float]]
    example_batch: Callable[[Mapping[str, Any], int], Any]
    module: ModuleType | None = field(default=None, repr=False, compare=False)

    def reached_target(self, value: float) -> bool:
        """Whether a metric value meets the task's target (``>=`` for max, ``<=`` for min)."""
        return value >= self.target if self.mode == "max" else value <= self.target

    def sample_config(self, seed: int | None = None) -> dict[str, Any]:
        """One config drawn from :attr:`search_space` (fixed keys of ``default_config`` kept)."""
        rng = random.Random(seed)
        out = dict(self.default_config)
        for key, domain in self.search_space.items():
            if hasattr(domain, "sample"):
                # Categorical samples via the stdlib RNG, numeric ones via numpy: seed both.
                out[key] = domain.sample(random_state=rng.randrange(2**31))
            else:
                out[key] = domain
        # ray returns numpy scalars; plain Python values are friendlier for torch/JSON.
        return {k: v.item() if hasattr(v, "item") else v for k, v in out.items()}


def _from_module(mod: ModuleType) -> Task:
    return Task(
        name=mod.NAME,
        metric=mod.METRIC,
        mode=mod.MODE,
        target=mod.TARGET,
        search_space=mod.SEARCH_SPACE,
        default_config=mod.DEFAULT_CONFIG,
        iteration=mod.ITERATION,
        train_samples=mod.TRAIN_SAMPLES,
        build_model=mod.build_model,
        build_optimizer=mod.build_optimizer,
        build_datasets=mod.build_datasets,
        build_loader=mod.build_loader,
        data_config=mod.data_config,
        smoke_config=mod.smoke_config,
        train_one_iteration=mod.train_one_iteration,
        evaluate=mod.evaluate,
        example_batch=mod.example_batch,
        module=mod,
    )


TASKS: dict[str, Task] = {t.name: t for t in map(_from_module, (cifar10, wlm, dcgan))}


def get_task(task: Task | str) -> Task:
    """``task`` itself, or the registered task of that name (``KeyError`` lists valid names)."""
    if isinstance(task, Task):
        return task
    try:
        return TASKS[task]
    except KeyError:
        raise KeyError(f"unknown task {task!r}; known: {sorted(TASKS)}") from None


def count_flops_and_params(
    task: Task | str, config: Mapping[str, Any], batch_size: int = 2
) -> tuple[float, int]:
    """``(training FLOPs per sample, parameter count)`` of ``task``'s model for ``config``.

    FLOPs are those of one real ``train_one_iteration`` call (forward + backward + optimizer
    step, as counted by :class:`torch.utils.flop_counter.FlopCounterMode`, i.e. matmuls and
    convolutions) on a random batch of ``batch_size`` samples, divided by ``batch_size``.  A
    sample is an image (cifar10), a ``bptt``-token window (wlm) or a real image together with
    one generated image (dcgan).  Runs on CPU; parameters shared by weight tying count once.
    """
    task = get_task(task)
    config = {**task.default_config, **config}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = task.build_model(config)
        params = sum(p.numel() for p in model.parameters())
        optimizer = task.build_optimizer(model, config)
        batch = task.example_batch(config, batch_size)
        with warnings.catch_warnings():
            # oneDNN's fused LSTM kernel is invisible to FlopCounterMode; disabling oneDNN routes
            # RNNs through plain matmuls that are counted (flags() also warns about TF32).
            warnings.simplefilter("ignore", UserWarning)
            with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as fc:
                task.train_one_iteration(model, optimizer, [batch], "cpu", config)
    return fc.get_total_flops() / batch_size, params
