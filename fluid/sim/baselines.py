"""The two baselines of the scoreboard: a careful plain-Tune user, and Fluid at one GPU per trial.

A gain of Fluid over plain Tune can come from three places, and the scoreboard separates them:

* ``tune_tuned``: plain Tune as a careful user runs it. For a model-based searcher (``TuneBOHB``,
  ``HyperOptSearch``) plain Tune keeps **one** trial pending (``TuneController.
  _get_max_pending_trials`` returns 1 unless ``max_concurrent_trials`` is set), so trials start
  one at a time; the careful user sets ``max_concurrent_trials`` to the GPU count, which
  ``tune.run`` turns into ``ConcurrencyLimiter(searcher, max_concurrent=N)``. For grid, random
  and the HyperBand family on random configs (Tune's ``BasicVariantGenerator``, which already
  keeps 200 pending) there is nothing to set: ``tune_tuned`` *is* plain Tune, and its rows are
  plain Tune's;
* ``fluid_one_gpu``: Fluid's admission and ordering with every trial on exactly one GPU: the
  ``FluidExecutor`` built as for ``fluid`` with ``c = 1`` (no packing), ``d = 1`` (no gang) and
  ``elastic = False`` (no gang probe, no growth into idle GPUs);
* ``fluid``: Fluid with its shapes.

The speedups: ``fluid_vs_tune`` (everything), ``fluid_vs_tune_tuned`` (what a careful Tune user
would still gain) and ``shape_gain`` (``fluid`` over ``fluid_one_gpu``: what packing and gangs
add), each a geometric mean over seeds with a bootstrap 95% interval and the per-seed ratios.

Example:
    >>> same_as_tune("asha"), same_as_tune("bohb")
    (True, False)
    >>> sorted(SCOREBOARD)
    ['fluid_vs_tune', 'fluid_vs_tune_tuned', 'shape_gain']
"""

from __future__ import annotations

from typing import Any

from ray.tune.search import ConcurrencyLimiter, Searcher

from fluid.algorithms import build_searcher

TUNE_TUNED = "tune_tuned"
ONE_GPU = "fluid_one_gpu"
#: ``FluidExecutor`` options that keep every trial on exactly one GPU.
ONE_GPU_OPTIONS: dict[str, Any] = {"c": 1, "d": 1, "elastic": False}
#: Scoreboard speedup -> (fast executor, slow executor), in time to target.
SCOREBOARD = {"fluid_vs_tune": ("fluid", "tune"),
              "fluid_vs_tune_tuned": ("fluid", TUNE_TUNED),
              "shape_gain": ("fluid", ONE_GPU)}


def same_as_tune(algorithm: str) -> bool:
    """Whether ``tune_tuned`` is plain Tune for ``algorithm`` (no model-based searcher)."""
    return build_searcher(algorithm, 0) is None


def limit_concurrency(searcher: Searcher, gpus: int) -> Searcher:
    """``searcher`` as ``tune.run(..., max_concurrent_trials=gpus)`` wraps it."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    return ConcurrencyLimiter(searcher, max_concurrent=gpus)


def scoreboard(stats: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{name, name_ci95, name_per_seed}`` for each scoreboard speedup, picked from a
    comparison's ``speedup_stats`` (geometric mean, 95% interval, per-seed ratios)."""
    out: dict[str, Any] = {}
    for name in SCOREBOARD:
        out[name], out[f"{name}_ci95"] = stats["speedup"][name], stats["speedup_ci95"][name]
        out[f"{name}_per_seed"] = stats["speedup_per_seed"][name]
    return out
