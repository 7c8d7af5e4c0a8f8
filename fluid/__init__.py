"""Fluid: a resource-aware execution engine for hyperparameter tuning on Ray Tune.

Fluid sizes every trial of a TrialGroup (a fraction of a GPU, one GPU, or an elastic gang of
GPUs) so the group finishes as soon as possible, while the tuning algorithm keeps deciding
*what* to train.

Example:
    >>> from ray.tune import TuneConfig
    >>> from fluid import FluidExecutor
    >>> config = TuneConfig(scheduler=FluidExecutor())
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Lazy, so that ``import fluid.core`` (numpy only) never pulls in Ray or torch.
_LAZY = {
    "FluidConfigError": "fluid.tune._executor",
    "FluidExecutor": "fluid.tune._executor",
    "FluidOptions": "fluid.tune._options",
    "TrialGroup": "fluid.tune._group",
    "TrialGroupMixin": "fluid.tune._group",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fluid' has no attribute {name!r}")
