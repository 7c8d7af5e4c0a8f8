"""Count FLOPs, parameters and activations on the real ``nn.Module`` of the experiment tasks,
and write the model cost table the simulator ships (``fluid/sim/workloads/profiles.json``).

Counting runs one real ``train_one_iteration`` of ``experiments.tasks`` on the CPU under
:class:`torch.utils.flop_counter.FlopCounterMode` (``experiments.tasks.count_flops_and_params``)
and a second one with forward hooks on every leaf module that sums the elements of their
outputs (the activations kept for the backward pass). It is slow (seconds per config:
``FlopCounterMode`` dispatches every op in Python), so every architecture of the three search
spaces is counted once, here, from a checkout::

    python -m experiments.profiles        # regenerates profiles.json (a few minutes)

The table's keys and units are ``fluid.sim.workloads.model_costs``'s (``arch_key``, counts per
sample, per token for the word language model at ``bptt = PROFILE_BPTT``).
"""

from __future__ import annotations

import itertools
import json
import sys
import warnings
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import torch

from experiments.tasks import TASKS, count_flops_and_params
from fluid.sim.workloads.model_costs import (
    ARCH_KEYS,
    PROFILE_BPTT,
    TABLE,
    ModelProfile,
    arch_key,
    profile,
    register,
)

__all__ = ["architectures", "count", "ensure_profiled", "main"]


def count(task: str, config: Mapping[str, Any]) -> ModelProfile:
    """Count one config on the real module (imports torch, runs a training step on the CPU)."""
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
                   if not list(m.children())]  # fmt: skip
        try:
            with warnings.catch_warnings(), torch.backends.mkldnn.flags(enabled=False):
                warnings.simplefilter("ignore", UserWarning)
                t.train_one_iteration(model, optimizer, [t.example_batch(cfg, batch)], "cpu", cfg)
        finally:
            for h in handles:
                h.remove()
    per = PROFILE_BPTT if task == "wlm" else 1
    return ModelProfile(flops / per, int(params), elements[0] / batch / per)


def ensure_profiled(task: str, config: Mapping[str, Any]) -> ModelProfile:
    """The counts of ``config``'s architecture: the shipped table's, else counted now and
    registered with the simulator for this process (configs outside the search spaces)."""
    defaults = TASKS[task].default_config
    try:
        return profile(task, config, defaults)
    except ValueError:
        counts = count(task, config)
        register(task, config, counts, defaults)
        return counts


def architectures(task: str) -> list[dict[str, Any]]:
    """Every combination of the architecture keys (``ARCH_KEYS``) the task's space can draw."""
    space = TASKS[task].search_space
    axes = []
    for k in ARCH_KEYS[task]:
        cats = getattr(space.get(k), "categories", None)
        axes.append([(k, v) for v in cats] if cats else [(k, TASKS[task].default_config[k])])
    return [dict(c) for c in itertools.product(*axes)]


def main() -> int:
    """Regenerate ``profiles.json`` for every architecture of the three search spaces."""
    table: dict[str, dict[str, float]] = {}
    for task in ARCH_KEYS:
        grid = architectures(task)
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
