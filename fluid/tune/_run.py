"""``tune.run`` that takes ``trial_executor=FluidExecutor(...)`` again.

Ray removed ``trial_executor`` in 2.7 and hard-codes its controller in ``tune.run``; Fluid plugs
in as the scheduler instead. This wrapper keeps the paper's entry point: the executor wraps
whatever ``scheduler=`` was given, and everything else goes to ``ray.tune.run`` unchanged.
"""

from __future__ import annotations

from typing import Any

from ray import tune as _ray_tune
from ray.tune.schedulers import TrialScheduler

from fluid.tune._executor import FluidConfigError, FluidExecutor


def run(run_or_experiment: Any, *args: Any, trial_executor: Any = None, **kwargs: Any) -> Any:
    """``ray.tune.run`` with Fluid: ``tune.run(train, ..., trial_executor=FluidExecutor())``.

    Args:
        run_or_experiment: the trainable, as for ``ray.tune.run``.
        trial_executor: a ``FluidExecutor``, or ``None`` for plain Tune.
        *args, **kwargs: passed to ``ray.tune.run``; ``scheduler=`` becomes the executor's
            base scheduler.

    Returns:
        The ``ExperimentAnalysis`` of ``ray.tune.run``.

    Example:
        >>> from fluid import tune  # doctest: +SKIP
        >>> tune.run(train, config={"lr": tune.grid_search([0.1, 0.01])},
        ...          stop={"training_iteration": 10},
        ...          trial_executor=tune.FluidExecutor())  # doctest: +SKIP
    """
    if trial_executor is None:
        return _ray_tune.run(run_or_experiment, *args, **kwargs)
    if not isinstance(trial_executor, FluidExecutor):
        raise FluidConfigError(
            "trial_executor must be a fluid.FluidExecutor (Ray removed its own trial executors "
            f"in 2.7), got {type(trial_executor).__name__}"
        )
    scheduler = kwargs.pop("scheduler", None)
    if scheduler is not None:
        if isinstance(scheduler, str) or not isinstance(scheduler, TrialScheduler):
            raise FluidConfigError(
                "with trial_executor=, scheduler= must be a TrialScheduler object, "
                f"got {scheduler!r}"
            )
        trial_executor.set_base(scheduler)
    return _ray_tune.run(run_or_experiment, *args, scheduler=trial_executor, **kwargs)
