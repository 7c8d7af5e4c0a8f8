"""Population Based Training with the population as a TrialGroup."""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining as _RayPBT

from fluid.tune import _ray_compat as compat
from fluid.tune._group import TrialGroupMixin

GROUP = "population"


class PopulationBasedTraining(TrialGroupMixin, _RayPBT):
    """Ray's ``PopulationBasedTraining`` with the population as one TrialGroup.

    A trial's budget is its next perturbation: ``last_perturbation_time`` plus the
    perturbation interval, in PBT's ``time_attr`` (fractional intervals included).

    The population is a ``keep_shape`` group: under ``FluidExecutor`` every member runs at the
    shape plain Tune gives it (what it asked for, at least one GPU), is never packed, ganged
    or resized, and starts or restarts when plain Tune would start it; PBT
    perturbs with the user's ``synch`` setting. Fluid predicts no gain for a population (it
    trains to the end; the paper found PBT gains little) and every other shape changes what
    PBT decides: members reach their perturbations in another order, PBT pauses more of them
    for their turn while another waits to restart, they exploit other donors, and the run
    reaches its target later. So Fluid runs PBT as plain Tune does (``fluid simulate
    --algorithm pbt`` shows the same times to target, best metrics and restarts on every seed).
    """

    def _declare(self, trial: Trial, result: dict | None = None) -> None:
        """The trial's budget: its next perturbation (none for a trial PBT does not track)."""
        until = compat.pbt_next_perturbation(self, trial)
        if until is not None:
            self.new_trial_group(
                [trial], until, GROUP, time_attr=compat.time_attr(self),
                progress={trial.trial_id: result} if result else None, keep_shape=True,
            )

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        self._declare(trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        self._declare(trial, result)
        return action
