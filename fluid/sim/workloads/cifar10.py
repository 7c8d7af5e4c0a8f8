"""CIFAR-10 with the AlexNet-style CNN of ``experiments/tasks/cifar10.py`` (target accuracy 0.90).

* Search space and defaults: ``spaces.CIFAR10`` (shared with the experiment script).
* One iteration: one epoch, 50,000 images in batches of ``batch_size``.
* Trial model: FLOPs, parameters and activations counted on the real ``AlexNetCIFAR`` for the
  config's ``num_filters``, ``kernel_size``, ``dense_width`` (``profile.py``); SGD with momentum
  (one optimizer slot); times and memory from the ground truth (``fluid.sim.truth``).
* Learning curve (synthetic surrogate, ``curves.py``), val_accuracy from 0.10 (chance):
  best asymptote ``0.905 + 0.012 * log3(num_filters/32) + 0.006 [kernel 5]
  + 0.002 * log2(dense_width/256)`` (bigger AlexNets do better, up to 0.929); penalties
  ``0.06 * decades(lr / 0.05)^2 + 0.4 (momentum - 0.9)^2 + 0.08 (dropout - 0.3)^2
  + 0.004 |log2(batch_size/128)|``; luck ``0.006 N(0,1)`` per config; rate per epoch
  ``0.2 (lr/0.05)^0.3 (batch_size/128)^-0.3`` (bigger batches take fewer steps per epoch),
  clipped to [0.02, 0.5]; validation noise 0.3%. Good configs reach 0.90 after 12-27 epochs.

Example:
    >>> w = cifar10()
    >>> w.curve(w.default_config).iterations_to(0.90)
    18
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fluid.sim.workloads.base import Hardware, Workload, task_workload
from fluid.sim.workloads.curves import Curve, log_distance, luck
from fluid.sim.workloads.spaces import CIFAR10 as TASK


def curve(c: Mapping[str, Any]) -> Curve:
    """The surrogate learning curve of a config (module docstring)."""
    best = (0.905 + 0.012 * math.log(c["num_filters"] / 32, 3) + 0.006 * (c["kernel_size"] == 5)
            + 0.002 * math.log2(c["dense_width"] / 256))
    penalty = (0.06 * log_distance(c["lr"], 0.05) ** 2 + 0.4 * (c["momentum"] - 0.9) ** 2
               + 0.08 * (c["dropout"] - 0.3) ** 2 + 0.004 * abs(math.log2(c["batch_size"] / 128)))
    final = min(0.99, best - penalty + 0.006 * luck(c, "cifar10"))
    rate = 0.2 * (c["lr"] / 0.05) ** 0.3 * (c["batch_size"] / 128) ** -0.3
    return Curve(0.10, max(final, 0.11), min(0.5, max(0.02, rate)), noise=0.003)


def cifar10(hardware: Hardware | None = None) -> Workload:
    """The CIFAR-10 workload on ``hardware`` (default: the paper's RTX 6000 + 10 GbE)."""
    return task_workload(TASK, curve, hardware, optimizer_slots=1,
                         description="CIFAR-10 AlexNet, epochs of 50k images")
