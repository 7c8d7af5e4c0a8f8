"""Trainables for the profiler tests: one modeled, one that really uses the CPU."""

from __future__ import annotations

import time

import numpy as np
from ray import tune

from fluid.core import slowdown
from fluid.train.modeled import trial_width
from fluid.tune import ElasticTrainable


def slowed(config: dict) -> None:
    """Sleeps 0.5 s x f(w) with the config's alpha and beta: the profiler must find them.
    (What Tune adds to each iteration's time, a tenth of a second or more when the machine is
    busy, counts alike at every width and pulls the ratios towards 1: it must stay small.)"""
    w = trial_width()
    for i in range(1, 100):
        time.sleep(0.5 * slowdown(w, config["alpha"], config["beta"]))
        tune.report({"i": i})


slowed.__mixins__ = (ElasticTrainable,)


def busy(config: dict) -> None:
    """Burns CPU for a fixed amount of work per iteration (packing shares 2 cores): about
    60 ms alone, long enough that a context switch or a busy Ray process is not the ratio."""
    a = np.ones((256, 256))
    for i in range(1, 100):
        for _ in range(60):
            a = np.tanh(a @ a / 256)
        tune.report({"i": i})
