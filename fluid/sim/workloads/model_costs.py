"""The model cost table: FLOPs, parameters and activations of every architecture of the spaces.

The simulator's per-iteration times and memory come from these counts (``fluid.sim.workloads``
never guesses a model's size). They were counted on the real ``nn.Module`` of the experiment
tasks (torch's ``FlopCounterMode`` plus forward hooks for the activations) by the experiments'
calibration, which writes ``profiles.json`` next to this file, shipped with the package::

    python -m experiments.profiles        # regenerates profiles.json (a few minutes, torch)

Reading the table needs neither torch nor ``experiments``. Only the keys that change the model's
shape matter (``ARCH_KEYS``); for the word language model the counts are per token, taken at
``bptt = PROFILE_BPTT`` and scaled linearly with ``bptt`` (an RNN step and the decoder both cost
the same per token; ``tests/experiments`` checks the linearity on the real module).

Example:
    >>> arch_key("cifar10", {"num_filters": 64, "kernel_size": 5, "dense_width": 1024, "lr": 0.1})
    'cifar10/num_filters=64/kernel_size=5/dense_width=1024'
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Config keys that change the model (and so FLOPs, parameters, activations), per task.
ARCH_KEYS: dict[str, tuple[str, ...]] = {
    "cifar10": ("num_filters", "kernel_size", "dense_width"),
    "wlm": ("cell", "emsize", "nhid", "nlayers", "tied"),
    "dcgan": ("nz", "ngf", "ndf"),
}
#: bptt at which the word language model is counted (counts are then per token).
PROFILE_BPTT = 5
TABLE = Path(__file__).with_name("profiles.json")

_lock = threading.Lock()
_table: dict[str, dict[str, float]] | None = None


@dataclass(frozen=True)
class ModelProfile:
    """Counts of one architecture (per sample: an image, or for ``wlm`` one token).

    Attributes:
        flops_per_sample: training FLOPs (forward + backward, matmuls and convolutions).
        params: parameters (shared ones once).
        activations_per_sample: elements of leaf-module outputs in one training pass.
    """

    flops_per_sample: float
    params: int
    activations_per_sample: float


def arch_key(task: str, config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> str:
    """The table key of ``config``'s architecture (``defaults`` fill missing keys)."""
    defaults = defaults if defaults is not None else {}
    parts = [f"{k}={config.get(k, defaults.get(k))}" for k in ARCH_KEYS[task]]
    return "/".join([task, *parts])


def _load() -> dict[str, dict[str, float]]:
    global _table
    with _lock:
        if _table is None:
            _table = json.loads(TABLE.read_text()) if TABLE.exists() else {}
        return _table


def profile(
    task: str, config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> ModelProfile:
    """Counts of ``config``'s architecture, from the table (``ValueError`` when not there)."""
    table = _load()
    key = arch_key(task, config, defaults)
    if key not in table:
        raise ValueError(
            f"no model profile for {key!r} in {TABLE.name}; the table covers the search spaces "
            "of fluid.sim.workloads.spaces (regenerate it from a checkout: "
            "python -m experiments.profiles)"
        )
    return ModelProfile(**table[key])


def register(
    task: str, config: Mapping[str, Any], counts: ModelProfile,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Add the counts of an architecture outside the shipped table, for this process only
    (the experiments' calibration counts the configs it measures: ``experiments.profiles``)."""
    table = _load()
    with _lock:
        table[arch_key(task, config, defaults)] = asdict(counts)
