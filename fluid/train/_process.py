"""Running an elastic trial's loop in a process: the trial process itself (world size 1),
and what a gang worker shares with it (device, MPS settings, checkpoint root, the loop call).
"""

from __future__ import annotations

import inspect
import logging
import os
import tempfile
from collections.abc import Callable
from typing import Any

import ray
import torch
from ray.tune import Checkpoint

from fluid.train import _checkpoint as _ck
from fluid.train._context import TrainContext, _set_context

logger = logging.getLogger(__name__)


def _current_bundles() -> list[dict[str, float]] | None:
    try:
        pgf = ray.tune.get_context().get_trial_resources()
    except Exception:  # noqa: BLE001 -- outside a Tune session the accessor raises
        return None
    return None if pgf is None else [dict(b) for b in pgf.bundles]


def _trial_id() -> str:
    try:
        return str(ray.tune.get_context().get_trial_id())
    except Exception:  # noqa: BLE001
        return f"pid{os.getpid()}"


def _ckpt_root(trial_id: str, role: str) -> str:
    return os.path.join(tempfile.gettempdir(), "fluid-ckpt", trial_id, role)


class _TuneSession:
    """World size 1: straight to ray.tune in the trial process."""

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        try:
            ray.tune.report(metrics, checkpoint=checkpoint)
        finally:
            # Tune has copied the directory to trial storage by now.
            _ck._release(checkpoint)

    def get_checkpoint(self) -> Checkpoint | None:
        return ray.tune.get_checkpoint()


def _loop_takes_config(loop: Callable[..., Any]) -> bool:
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                  inspect.Parameter.VAR_POSITIONAL)
    return any(p.kind in positional for p in inspect.signature(loop).parameters.values())


def _apply_mps_env(share: float) -> None:
    """Connect this process to the node's MPS daemon (if Fluid runs one) before CUDA starts,
    unless it was started with the settings (a packed trial's actor is)."""
    from fluid.gpu.mps import PIPE_ENV, join

    if PIPE_ENV not in os.environ:
        join(share)  # {} for a whole GPU or none


def _local_device(share: float, index: int = 0) -> torch.device:
    if share > 0 and torch.cuda.is_available():
        return torch.device("cuda", index)
    return torch.device("cpu")


def _run_in_process(loop: Callable[..., Any], config: dict[str, Any], share: float) -> None:
    _apply_mps_env(share)
    device = _local_device(share)
    if share > 0 and device.type == "cpu":
        logger.info("fluid: trial holds %.2f GPU but CUDA is not available; using the CPU", share)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    _ck._use_checkpoint_root(_ckpt_root(_trial_id(), "trial"))
    ctx = TrainContext(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0,
                       device=device, gpu_share=min(share, 1.0), backend=None,
                       _session=_TuneSession())
    _run_loop(loop, config, ctx)


def _run_loop(loop: Callable[..., Any], config: dict[str, Any], ctx: TrainContext) -> None:
    """Run the loop with ``ctx`` as its `get_context`; the context and checkpoint root are
    cleared afterwards, however the loop ends."""
    _set_context(ctx)
    try:
        if _loop_takes_config(loop):
            loop(config)
        else:
            loop()
    finally:
        _set_context(None)
        _ck._use_checkpoint_root(None)
