"""Word language model of ``experiments/tasks/wlm.py`` on WikiText-2 (target perplexity 140).

* Search space and defaults: ``spaces.WLM`` (shared with the experiment script).
* One iteration: one epoch over the 2,088,628 training tokens in ``bptt`` windows, batches of
  ``batch_size`` windows.
* Trial model: FLOPs, parameters and activations counted per token on the real RNN LM for the
  config's ``cell``, ``emsize``, ``nhid``, ``nlayers``, ``tied`` (``profile.py``); plain SGD
  (no optimizer slot); times and memory from the ground truth (``fluid.sim.truth``).
* Learning curve (synthetic surrogate on log perplexity, ``curves.py``), from 1000:
  best asymptote 95 (a 2x650 LSTM on WikiText-2 reaches ~90-100), times ``exp`` of:
  cell LSTM 0, GRU 0.08, RNN_TANH 0.45, RNN_RELU 0.55; nhid 650/512/256/128: 0/0.03/0.12/0.25;
  emsize 0/0.01/0.04/0.08; nlayers 2/3/1: 0/0.03/0.05; tied -0.04;
  ``0.5 decades(lr/20)^2 + 0.5 (dropout - 0.45)^2 + 0.1 (clip - 0.25)^2
  + 0.02 |log2(batch_size/20)| + 0.01 |log2(bptt/35)|``; luck ``0.03 N(0,1)``;
  rate per epoch ``0.25 (lr/20)^0.3 (batch_size/20)^-0.3``, clipped to [0.02, 0.6];
  validation noise 0.5%. Good configs reach 140 after 5-10 epochs.

Example:
    >>> w = wlm()
    >>> w.curve(w.default_config).iterations_to(140)
    6
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fluid.sim.workloads.base import Hardware, Workload, task_workload
from fluid.sim.workloads.curves import Curve, log_distance, luck
from fluid.sim.workloads.spaces import WLM as TASK

_CELL = {"LSTM": 0.0, "GRU": 0.08, "RNN_TANH": 0.45, "RNN_RELU": 0.55}
_NHID = {650: 0.0, 512: 0.03, 256: 0.12, 128: 0.25}
_EMSIZE = {650: 0.0, 512: 0.01, 256: 0.04, 128: 0.08}
_LAYERS = {2: 0.0, 3: 0.03, 1: 0.05}


def curve(c: Mapping[str, Any]) -> Curve:
    """The surrogate learning curve of a config (module docstring)."""
    log_excess = (
        _CELL[c["cell"]] + _NHID.get(c["nhid"], 0.1) + _EMSIZE.get(c["emsize"], 0.04)
        + _LAYERS.get(c["nlayers"], 0.05) - 0.04 * bool(c["tied"])
        + 0.5 * log_distance(c["lr"], 20.0) ** 2 + 0.5 * (c["dropout"] - 0.45) ** 2
        + 0.1 * (c["clip"] - 0.25) ** 2 + 0.02 * abs(math.log2(c["batch_size"] / 20))
        + 0.01 * abs(math.log2(c["bptt"] / 35)) + 0.03 * luck(c, "wlm")
    )
    rate = 0.25 * (c["lr"] / 20.0) ** 0.3 * (c["batch_size"] / 20) ** -0.3
    return Curve(1000.0, min(900.0, 95.0 * math.exp(log_excess)), min(0.6, max(0.02, rate)),
                 log=True, noise=0.005)


def wlm(hardware: Hardware | None = None) -> Workload:
    """The WLM workload on ``hardware`` (default: the paper's RTX 6000 + 10 GbE)."""
    return task_workload(TASK, curve, hardware, optimizer_slots=0, per_token=True,
                         description="WikiText-2 RNN LM, epochs of 2.1M tokens")
