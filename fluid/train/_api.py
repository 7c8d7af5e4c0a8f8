"""`report` and `get_checkpoint`: the calls a loop makes on every rank."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import torch
from ray.tune import Checkpoint

from fluid.gpu.nvml import PEAK_MEMORY_KEY, peak_gpu_memory
from fluid.train._context import get_context


def _plain(key: str, value: Any) -> Any:
    # Tune refuses tensors in metrics; one-element tensors are the common slip.
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"report(metrics=...): metric {key!r} is a tensor of shape "
                             f"{tuple(value.shape)}; report a number")
        return value.item()
    return value


def report(metrics: Mapping[str, Any], checkpoint: Checkpoint | None = None) -> None:
    """Report this iteration's metrics (and optionally a checkpoint) to Tune.

    Every rank must call ``report`` the same number of times: it is the point where the
    ranks and the trial synchronise (no rank starts the next iteration before Tune has
    taken this one). Only rank 0's metrics and checkpoint reach Tune; the other ranks'
    are dropped. Each call is one Tune ``training_iteration``. On a GPU the peak memory
    allocated by torch is added as ``fluid_peak_gpu_memory`` (bytes).

    To be resizable without repeating iterations, report a checkpoint with every result
    (Fluid pauses a trial after a result and restarts it from that result's checkpoint).

    Example:
        >>> ckpt = fluid.train.save_checkpoint(model=model, optimizer=opt, loader=loader)
        >>> fluid.train.report({"loss": 0.3}, checkpoint=ckpt)     # doctest: +SKIP
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(f"report(metrics=...) must be a dict, got {type(metrics)!r}")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError("report(checkpoint=...) must be a ray.tune.Checkpoint, "
                        f"got {type(checkpoint)!r}")
    ctx = get_context()
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        if not isinstance(k, str):
            raise TypeError(f"report(metrics=...): keys must be strings, got {k!r}")
        out[k] = _plain(k, v)
    peak = peak_gpu_memory() if ctx.device.type == "cuda" else None
    if isinstance(peak, numbers.Integral):  # None without CUDA
        out[PEAK_MEMORY_KEY] = int(peak)
    assert ctx._session is not None
    ctx._session.report(out, checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint this trial resumes from (on every rank), or None on a fresh start.

    Example:
        >>> ckpt = fluid.train.get_checkpoint()                     # doctest: +SKIP
    """
    ctx = get_context()
    assert ctx._session is not None
    return ctx._session.get_checkpoint()
