"""CIFAR-10 image classification with an AlexNet-style CNN.

Architecture (for 32x32 inputs), ``c = num_filters``, ``k = kernel_size``::

    conv k c  -> BN -> ReLU -> maxpool2      32 -> 16
    conv k 3c -> BN -> ReLU -> maxpool2      16 -> 8
    conv 3 6c -> BN -> ReLU
    conv 3 4c -> BN -> ReLU
    conv 3 4c -> BN -> ReLU -> maxpool2      8 -> 4
    dropout -> fc dense_width -> ReLU -> dropout -> fc dense_width -> ReLU -> fc 10

With ``c = 64`` the conv widths are AlexNet's (64, 192, 384, 256, 256).  Batch norm is added
because plain AlexNet does not reliably reach the 90% target on CIFAR-10.

One *iteration* is one epoch over the (augmented) training loader; evaluation is one pass over
the official 10,000-image test batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from experiments.data.cifar10 import cifar10_datasets
from fluid.sim.workloads.spaces import CIFAR10

from ._common import Config, Device, evaluate_classifier, train_classifier_iteration

# The objective, search space and defaults live in fluid (the simulator models the same task).
NAME, METRIC, MODE, TARGET = CIFAR10.name, CIFAR10.metric, CIFAR10.mode, CIFAR10.target
ITERATION = "one epoch over the training loader (50,000 images; 512 in smoke mode)"
TRAIN_SAMPLES = CIFAR10.train_samples
SEARCH_SPACE: dict[str, Any] = dict(CIFAR10.space)
DEFAULT_CONFIG: dict[str, Any] = dict(CIFAR10.defaults)
WEIGHT_DECAY = 5e-4


def _conv(cin: int, cout: int, k: int) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, k, padding=k // 2, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    ]


class AlexNetCIFAR(nn.Module):
    """AlexNet-style CNN for 3x32x32 images (see module docstring)."""

    def __init__(
        self,
        num_filters: int = 64,
        kernel_size: int = 5,
        dense_width: int = 1024,
        dropout: float = 0.5,
        num_classes: int = 10,
    ) -> None:
        super().__init__()
        c, k = num_filters, kernel_size
        self.features = nn.Sequential(
            *_conv(3, c, k), nn.MaxPool2d(2),
            *_conv(c, 3 * c, k), nn.MaxPool2d(2),
            *_conv(3 * c, 6 * c, 3),
            *_conv(6 * c, 4 * c, 3),
            *_conv(4 * c, 4 * c, 3), nn.MaxPool2d(2),
        )  # fmt: skip
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(4 * c * 4 * 4, dense_width),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(dense_width, dense_width),
            nn.ReLU(inplace=True),
            nn.Linear(dense_width, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, num_classes)`` for images ``(N, 3, 32, 32)``."""
        return self.classifier(self.features(x))


def build_model(config: Config) -> nn.Module:
    """AlexNet-style CNN from ``num_filters``, ``kernel_size``, ``dense_width``, ``dropout``."""
    return AlexNetCIFAR(
        num_filters=int(config["num_filters"]),
        kernel_size=int(config["kernel_size"]),
        dense_width=int(config["dense_width"]),
        dropout=float(config["dropout"]),
    )


def build_optimizer(model: nn.Module, config: Config) -> torch.optim.Optimizer:
    """SGD with ``lr``, ``momentum`` (Nesterov) and a fixed 5e-4 weight decay."""
    return torch.optim.SGD(
        model.parameters(),
        lr=float(config["lr"]),
        momentum=float(config["momentum"]),
        nesterov=True,
        weight_decay=WEIGHT_DECAY,
    )


def build_datasets(data_dir: str | Path | None, smoke: bool = False) -> tuple[Dataset, Dataset]:
    """``(train, val)``: augmented CIFAR-10 train set and the test batch (synthetic if smoke)."""
    return cifar10_datasets(data_dir, smoke)


def build_loader(dataset: Dataset, config: Config, train: bool, num_workers: int = 0) -> DataLoader:
    """Loader with ``config["batch_size"]``; shuffled (last partial batch dropped) for training."""
    return DataLoader(
        dataset,
        batch_size=int(config["batch_size"]),
        shuffle=train,
        drop_last=train,  # a size-1 last batch would break BatchNorm in train mode
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )


def data_config(train_dataset: Any) -> dict[str, Any]:
    """No data-dependent model settings for CIFAR-10."""
    return {}


def smoke_config(config: Config) -> dict[str, Any]:
    """Shrink ``config`` so an epoch of smoke data takes well under a second on one CPU core."""
    out = dict(config)
    out["num_filters"] = max(4, int(config["num_filters"]) // 8)
    out["dense_width"] = max(16, int(config["dense_width"]) // 16)
    out["batch_size"] = min(int(config["batch_size"]), 64)
    return out


def train_one_iteration(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable[Any],
    device: Device,
    config: Config | None = None,
    max_batches: int | None = None,
) -> dict[str, float]:
    """One epoch (or ``max_batches`` batches) of SGD -> ``train_loss``, ``train_accuracy``, ``num_samples``."""
    return train_classifier_iteration(model, optimizer, loader, device, max_batches)


def evaluate(
    model: nn.Module,
    loader: Iterable[Any],
    device: Device,
    config: Config | None = None,
    max_batches: int | None = None,
) -> dict[str, float]:
    """Validation pass -> ``val_loss``, ``val_accuracy``."""
    loss, acc, _ = evaluate_classifier(model, loader, device, max_batches)
    return {"val_loss": loss, "val_accuracy": acc}


def example_batch(config: Config, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random batch of ``n`` samples shaped like the training data (for FLOP counting)."""
    return torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,))
