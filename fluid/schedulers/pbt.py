"""Population Based Training with the population as a TrialGroup."""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining as _RayPBT

from fluid.tune._group import TrialGroupMixin

GROUP = "population"


class PopulationBasedTraining(TrialGroupMixin, _RayPBT):
    """Ray's ``PopulationBasedTraining`` with the population as one TrialGroup.

    A trial's budget is its next perturbation: ``last_perturbation_time`` plus the
    perturbation interval, in PBT's ``time_attr`` (fractional intervals included). The population is a
    ``sync`` group: under Fluid a member that reached its perturbation waits until the others
    have, so exploits clone donors at the same point as under plain Tune.
    """

    def _declare(self, trial: Trial, result: dict | None = None) -> None:
        state = self._trial_state[trial]
        self.new_trial_group(
            [trial], state.last_perturbation_time + self._perturbation_interval, GROUP,
            time_attr=self._time_attr, progress={trial.trial_id: result} if result else None,
            sync=True,
        )

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        self._declare(trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        if trial in self._trial_state:
            self._declare(trial, result)
        return action
