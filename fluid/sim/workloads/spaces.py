"""The paper's three tuning tasks as the tuner sees them: objective, search space, defaults.

Written once, here, and used by both the simulator's workloads (``cifar10.py``, ``wlm.py``,
``dcgan.py`` next to this file) and the real experiment tasks (``experiments/tasks``), so
the two always search the same space. Ray Tune's search-space domains only: no torch.

Example:
    >>> CIFAR10.metric, CIFAR10.target, sorted(CIFAR10.grid)
    ('val_accuracy', 0.9, ['batch_size', 'lr', 'num_filters'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ray import tune


@dataclass(frozen=True)
class TaskSpace:
    """One task's tuning problem.

    Attributes:
        name: ``cifar10``, ``wlm`` or ``dcgan``.
        metric, mode, target: the objective (``mode`` as in Ray Tune) and the quality to reach.
        train_samples: the training set: images (cifar10, dcgan) or tokens (wlm).
        space: the search space (Ray Tune domains).
        defaults: a full config (the keys outside ``space`` are fixed).
        grid: grid search's axes (``tune.grid_search``), the rest at ``defaults``.
        mutations: PBT's ``hyperparam_mutations``.
    """

    name: str
    metric: str
    mode: str
    target: float
    train_samples: int
    space: Mapping[str, Any]
    defaults: Mapping[str, Any]
    grid: Mapping[str, Any]
    mutations: Mapping[str, Any]


def _pick(space: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: space[k] for k in keys}


_CIFAR10_SPACE: dict[str, Any] = {
    # architecture
    "num_filters": tune.choice([32, 48, 64, 96]),
    "kernel_size": tune.choice([3, 5]),
    "dense_width": tune.choice([256, 512, 1024, 2048]),
    # training
    "lr": tune.loguniform(1e-3, 2e-1),
    "momentum": tune.uniform(0.5, 0.99),
    "dropout": tune.uniform(0.0, 0.6),
    "batch_size": tune.choice([32, 64, 128, 256]),
}
CIFAR10 = TaskSpace(
    name="cifar10", metric="val_accuracy", mode="max", target=0.90, train_samples=50_000,
    space=_CIFAR10_SPACE,
    defaults={"num_filters": 64, "kernel_size": 5, "dense_width": 1024, "lr": 0.05,
              "momentum": 0.9, "dropout": 0.5, "batch_size": 128},
    grid={"lr": tune.grid_search([0.01, 0.05, 0.1]),
          "batch_size": tune.grid_search([64, 128, 256]),
          "num_filters": tune.grid_search([32, 64, 96])},
    mutations=_pick(_CIFAR10_SPACE, "lr", "momentum"),
)  # fmt: skip

#: The word language model's recurrent cells.
WLM_CELLS = ("RNN_TANH", "RNN_RELU", "LSTM", "GRU")
_WLM_SPACE: dict[str, Any] = {
    # architecture
    "cell": tune.choice(list(WLM_CELLS)),
    "emsize": tune.choice([128, 256, 512, 650]),
    "nhid": tune.choice([128, 256, 512, 650]),
    "nlayers": tune.choice([1, 2, 3]),
    # training
    "lr": tune.loguniform(1.0, 40.0),
    "dropout": tune.uniform(0.0, 0.6),
    "batch_size": tune.choice([10, 20, 32, 64]),
    "bptt": tune.choice([25, 35, 50, 70]),
    "clip": tune.uniform(0.1, 1.0),
    "tied": tune.choice([False, True]),
}
WLM = TaskSpace(
    name="wlm", metric="val_perplexity", mode="min", target=140.0,
    train_samples=2_088_628,  # training tokens of WikiText-2 (Merity et al.)
    space=_WLM_SPACE,
    defaults={"cell": "LSTM", "emsize": 650, "nhid": 650, "nlayers": 2, "lr": 20.0,
              "dropout": 0.5, "batch_size": 20, "bptt": 35, "clip": 0.25, "tied": True},
    grid={"lr": tune.grid_search([5.0, 20.0, 40.0]),
          "nhid": tune.grid_search([256, 512, 650]),
          "cell": tune.grid_search(["LSTM", "GRU", "RNN_TANH"])},
    mutations=_pick(_WLM_SPACE, "lr", "dropout"),
)  # fmt: skip

_DCGAN_SPACE: dict[str, Any] = {
    "lr_g": tune.loguniform(1e-5, 1e-2),
    "lr_d": tune.loguniform(1e-5, 1e-2),
}
DCGAN = TaskSpace(
    name="dcgan", metric="inception_score", mode="max", target=5.2, train_samples=60_000,
    space=_DCGAN_SPACE,
    # The networks are fixed (not searched); present so smoke mode can shrink them.
    defaults={"lr_g": 2e-4, "lr_d": 2e-4, "nz": 100, "ngf": 64, "ndf": 64, "batch_size": 64,
              "is_samples": 5000},
    grid={"lr_g": tune.grid_search([5e-5, 2e-4, 1e-3]),
          "lr_d": tune.grid_search([5e-5, 2e-4, 1e-3])},
    mutations=_pick(_DCGAN_SPACE, "lr_g", "lr_d"),
)  # fmt: skip

TASK_SPACES: dict[str, TaskSpace] = {t.name: t for t in (CIFAR10, WLM, DCGAN)}
