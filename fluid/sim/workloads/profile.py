"""Count FLOPs, parameters and activations on the real ``nn.Module`` of the experiment tasks.

The simulator's per-iteration times and memory come from these counts (``fluid.sim.workloads``
never guesses a model's size). Counting runs one real ``train_one_iteration`` of
``experiments.tasks`` on the CPU under :class:`torch.utils.flop_counter.FlopCounterMode`
(``experiments.tasks.count_flops_and_params``) and a second one with forward hooks on every leaf
module that sums the elements of their outputs (the activations kept for the backward pass).

Counting is slow (seconds per config: ``FlopCounterMode`` dispatches every op in Python), so the
architectures of the three search spaces are counted once, offline, into ``profiles.json`` next
to this file::

    python -m fluid.sim.workloads.profile        # regenerates profiles.json (a few minutes)

A config outside the table is counted lazily on first use (torch and ``experiments`` are imported
only then). Only the keys that change the model's shape matter (``ARCH_KEYS``); for the word
language model the counts are per token, taken at ``bptt = PROFILE_BPTT`` and scaled linearly
with ``bptt`` (an RNN step and the decoder both cost the same per token;
``tests/sim/test_workloads.py`` checks the linearity on the real module).

Example:
    >>> arch_key("cifar10", {"num_filters": 64, "kernel_size": 5, "dense_width": 1024, "lr": 0.1})
    'cifar10/num_filters=64/kernel_size=5/dense_width=1024'
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import warnings
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


def count(task: str, config: Mapping[str, Any]) -> ModelProfile:
    """Count one config on the real module (slow: imports torch, runs a training step)."""
    import torch

    from experiments.tasks import TASKS, count_flops_and_params

    t = TASKS[task]
    cfg = {**t.default_config, **dict(config)}
    if task == "wlm":
        cfg["bptt"] = PROFILE_BPTT
    batch = 2
    flops, params = count_flops_and_params(t, cfg, batch_size=batch)
    elements = [0]

    def hook(_module: Any, _inputs: Any, output: Any) -> None:
        stack = [output]
        while stack:
            x = stack.pop()
            if isinstance(x, torch.Tensor):
                elements[0] += x.numel()
            elif isinstance(x, (tuple, list)):
                stack.extend(x)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = t.build_model(cfg)
        optimizer = t.build_optimizer(model, cfg)
        handles = [m.register_forward_hook(hook) for m in model.modules()
                   if not list(m.children())]
        try:
            with warnings.catch_warnings(), torch.backends.mkldnn.flags(enabled=False):
                warnings.simplefilter("ignore", UserWarning)
                t.train_one_iteration(model, optimizer, [t.example_batch(cfg, batch)], "cpu", cfg)
        finally:
            for h in handles:
                h.remove()
    per = PROFILE_BPTT if task == "wlm" else 1
    return ModelProfile(flops / per, int(params), elements[0] / batch / per)


def profile(
    task: str, config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> ModelProfile:
    """Counts of ``config``'s architecture: from the table, else counted now (and cached)."""
    table = _load()
    key = arch_key(task, config, defaults)
    if key not in table:
        prof = count(task, config)
        with _lock:
            table[key] = asdict(prof)
    return ModelProfile(**table[key])


def _grid(task: str) -> list[dict[str, Any]]:
    from experiments.tasks import TASKS

    space = TASKS[task].search_space
    axes = []
    for k in ARCH_KEYS[task]:
        dom = space.get(k)
        cats = getattr(dom, "categories", None)
        axes.append([(k, v) for v in cats] if cats else [(k, TASKS[task].default_config[k])])
    return [dict(c) for c in itertools.product(*axes)]


def main() -> int:
    """Regenerate ``profiles.json`` for every architecture of the three search spaces."""
    from experiments.tasks import TASKS

    table: dict[str, dict[str, float]] = {}
    for task in ARCH_KEYS:
        grid = _grid(task)
        for i, cfg in enumerate(grid, 1):
            full = {**TASKS[task].default_config, **cfg}
            table[arch_key(task, full)] = asdict(count(task, cfg))
            print(f"\r{task}: {i}/{len(grid)}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(table)} profiles to {TABLE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
