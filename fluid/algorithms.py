"""The tuning algorithms Fluid is evaluated with: one registry and one builder.

Both the simulator (``fluid.sim.experiment``) and the experiment scripts
(``experiments/run.py``) build their Ray Tune schedulers and searchers here, so the two run the
same algorithm with the same knobs:

========== ===================================================================================
grid       no scheduler (FIFO), no searcher: ``BasicVariantGenerator`` over a grid
random     no scheduler (FIFO), no searcher: ``BasicVariantGenerator`` on random configs
hyperband  ``HyperBandScheduler(max_t, reduction_factor)``
syncbohb   ``SyncBOHB(max_t, reduction_factor)`` + ``TuneBOHB`` (Fluid's synchronous BOHB)
bohb       ``HyperBandForBOHB(max_t, reduction_factor)`` + ``TuneBOHB``
asha       ``ASHAScheduler(max_t, grace_period, reduction_factor)``
pbt        ``PopulationBasedTraining(perturbation_interval, hyperparam_mutations)``
hyperopt   no scheduler (FIFO), ``HyperOptSearch``
========== ===================================================================================

Every scheduler counts time in ``training_iteration``. Importing this module loads neither Ray
nor torch (the CLI lists ``ALGORITHMS`` in its help); building does.

Example:
    >>> options = AlgorithmOptions(max_t=27)
    >>> type(build_scheduler("hyperband", options)).__name__
    'HyperBandScheduler'
    >>> build_scheduler("grid", options) is None, num_samples("grid", 64)
    (True, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ALGORITHMS = ("grid", "random", "hyperband", "syncbohb", "bohb", "asha", "pbt", "hyperopt")
#: HyperBand's, BOHB's and ASHA's reduction factor (``eta``) unless told otherwise.
REDUCTION_FACTOR = 3


@dataclass(frozen=True)
class AlgorithmOptions:
    """The knobs of the algorithms.

    Attributes:
        max_t: iterations of a full budget (the schedulers' ``max_t``).
        reduction_factor: HyperBand's, BOHB's and ASHA's ``eta``.
        grace_period: ASHA's first rung.
        perturbation_interval: PBT's, in iterations (``None``: ``max(1, max_t // 9)``).
        mutations: PBT's ``hyperparam_mutations``.
    """

    max_t: int
    reduction_factor: int = REDUCTION_FACTOR
    grace_period: int = 1
    perturbation_interval: int | None = None
    mutations: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_t < 1:
            raise ValueError(f"AlgorithmOptions(max_t=...) must be >= 1, got {self.max_t}")
        if self.reduction_factor < 2:
            raise ValueError(
                f"AlgorithmOptions(reduction_factor=...) must be >= 2, got {self.reduction_factor}"
            )


def check_algorithm(algorithm: str) -> None:
    """A clear ``ValueError`` naming the known algorithms when ``algorithm`` is not one."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")


def num_samples(algorithm: str, samples: int) -> int:
    """Tune's ``num_samples``: 1 for ``grid`` (the grid decides), else ``samples``."""
    check_algorithm(algorithm)
    return 1 if algorithm == "grid" else samples


def build_scheduler(
    algorithm: str, options: AlgorithmOptions, *, adapted: bool = True, log_config: bool = True
) -> Any:
    """The algorithm's ``TrialScheduler``, or ``None`` for FIFO (grid, random, hyperopt).

    Args:
        algorithm: one of ``ALGORITHMS``.
        options: the knobs.
        adapted: Fluid's adapted classes (``fluid.schedulers``) instead of Ray's own; SyncBOHB
            has no Ray class and is always Fluid's (outside Fluid it behaves as a plain one).
        log_config: PBT writes its exploit log under Ray's session directory (needs
            ``ray.init``; the simulator turns it off).
    """
    check_algorithm(algorithm)
    from ray.tune import schedulers as ray_s

    from fluid import schedulers as fluid_s

    s = fluid_s if adapted else ray_s
    t, max_t, rf = "training_iteration", options.max_t, options.reduction_factor
    if algorithm == "hyperband":
        return s.HyperBandScheduler(time_attr=t, max_t=max_t, reduction_factor=rf)
    if algorithm == "syncbohb":
        return fluid_s.SyncBOHB(time_attr=t, max_t=max_t, reduction_factor=rf)
    if algorithm == "bohb":
        return s.HyperBandForBOHB(time_attr=t, max_t=max_t, reduction_factor=rf)
    if algorithm == "asha":
        return s.ASHAScheduler(time_attr=t, max_t=max_t, grace_period=options.grace_period,
                               reduction_factor=rf)  # fmt: skip
    if algorithm == "pbt":
        interval = options.perturbation_interval or max(1, max_t // 9)
        return s.PopulationBasedTraining(
            time_attr=t, perturbation_interval=interval,
            hyperparam_mutations=dict(options.mutations), log_config=log_config,
        )  # fmt: skip
    return None


def build_searcher(algorithm: str, seed: int = 0) -> Any:
    """The algorithm's ``Searcher`` (``TuneBOHB``, ``HyperOptSearch``), or ``None`` for Tune's
    ``BasicVariantGenerator`` (grid, random and the HyperBand family on random configs)."""
    check_algorithm(algorithm)
    if algorithm in ("syncbohb", "bohb"):
        from ray.tune.search.bohb import TuneBOHB

        return TuneBOHB(seed=seed)
    if algorithm == "hyperopt":
        from ray.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=seed)
    return None
