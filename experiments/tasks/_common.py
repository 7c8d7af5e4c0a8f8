"""Helpers shared by the task modules (pure torch, no distributed code)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

Config = Mapping[str, Any]
Device = torch.device | str


def unwrap(model: nn.Module) -> nn.Module:
    """The wrapped module of a DistributedDataParallel-style wrapper, else ``model``."""
    return getattr(model, "module", model)


def batches(loader: Iterable[Any], max_batches: int | None) -> Iterable[tuple[int, Any]]:
    """Enumerate ``loader``, stopping after ``max_batches`` batches when given."""
    for i, batch in enumerate(loader):
        if max_batches is not None and i >= max_batches:
            return
        yield i, batch


def mean(total: torch.Tensor | float, count: int) -> float:
    """``total / count`` as a float; NaN for an empty loader rather than a ZeroDivisionError."""
    return float(total) / count if count else math.nan


def train_classifier_iteration(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable[Any],
    device: Device,
    max_batches: int | None = None,
    clip: float | None = None,
) -> dict[str, float]:
    """One pass of cross-entropy training over ``loader`` (at most ``max_batches`` batches).

    Batches are ``(inputs, targets)``; logits may have extra dims (sequence models), they are
    flattened against the targets.  Returns ``train_loss`` (mean per target), ``train_accuracy``
    and ``num_samples`` (number of batch rows seen).
    """
    model.train()
    # Accumulate on the device: a .item() per batch would force a GPU sync every step.
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    targets_seen = rows = 0
    for _, (x, y) in batches(loader, max_batches):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        logits = logits.reshape(-1, logits.shape[-1])
        y_flat = y.reshape(-1)
        loss = nn.functional.cross_entropy(logits, y_flat)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        loss_sum += loss.detach() * y_flat.numel()
        correct += (logits.detach().argmax(-1) == y_flat).sum()
        targets_seen += y_flat.numel()
        rows += y.shape[0]
    return {
        "train_loss": mean(loss_sum, targets_seen),
        "train_accuracy": mean(correct, targets_seen),
        "num_samples": float(rows),
    }


@torch.no_grad()
def evaluate_classifier(
    model: nn.Module, loader: Iterable[Any], device: Device, max_batches: int | None = None
) -> tuple[float, float, int]:
    """Mean cross-entropy, accuracy and number of targets of ``model`` over ``loader``."""
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    n = 0
    for _, (x, y) in batches(loader, max_batches):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        logits = logits.reshape(-1, logits.shape[-1])
        y_flat = y.reshape(-1)
        loss_sum += nn.functional.cross_entropy(logits, y_flat, reduction="sum")
        correct += (logits.argmax(-1) == y_flat).sum()
        n += y_flat.numel()
    return mean(loss_sum, n), mean(correct, n), n
