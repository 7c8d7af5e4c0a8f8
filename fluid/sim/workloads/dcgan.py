"""DCGAN on MNIST of ``experiments/tasks/dcgan.py`` (target inception score 5.2).

* Search space and defaults: ``spaces.DCGAN``, shared with the experiment script (``lr_g``,
  ``lr_d``; the networks are fixed: nz 100, ngf 64, ndf 64, batch 64).
* One iteration: one epoch over the 60,000 training images.
* Trial model: FLOPs (generator + discriminator steps), parameters and activations counted on
  the real modules (``profile.py``); two Adam optimizers (two slots); the ground truth
  (``fluid.sim.truth``) for the rest.
* Learning curve (synthetic surrogate, ``curves.py``), inception score from 1.0:
  best asymptote 6.5, minus ``decades(lr_g/2e-4)^2 + decades(lr_d/2e-4)^2
  + 0.3 (decades(lr_g/2e-4) - decades(lr_d/2e-4))^2`` (the usual 2e-4 of Radford et al. 2016,
  and a balance between the two), luck ``0.15 N(0,1)``; rate per epoch
  ``0.15 (lr_g/2e-4)^0.3`` clipped to [0.02, 0.5]; validation noise 1%.

Example:
    >>> w = dcgan()
    >>> w.curve(w.default_config).iterations_to(5.2)
    9
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluid.sim.workloads.base import Hardware, Workload, task_workload
from fluid.sim.workloads.curves import Curve, log_distance, luck
from fluid.sim.workloads.spaces import DCGAN as TASK


def curve(c: Mapping[str, Any]) -> Curve:
    """The surrogate learning curve of a config (module docstring)."""
    g, d = log_distance(c["lr_g"], 2e-4), log_distance(c["lr_d"], 2e-4)
    final = 6.5 - g**2 - d**2 - 0.3 * (g - d) ** 2 + 0.15 * luck(c, "dcgan")
    rate = 0.15 * (c["lr_g"] / 2e-4) ** 0.3
    return Curve(1.0, max(final, 1.1), min(0.5, max(0.02, rate)), noise=0.01)


def dcgan(hardware: Hardware | None = None) -> Workload:
    """The DCGAN workload on ``hardware`` (default: the paper's RTX 6000 + 10 GbE)."""
    return task_workload(TASK, curve, hardware, optimizer_slots=2,
                         description="DCGAN on MNIST, epochs of 60k images")
