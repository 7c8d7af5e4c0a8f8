"""Population Based Training with the population as a TrialGroup."""

from __future__ import annotations

import logging
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining as _RayPBT

from fluid.tune._group import TrialGroupMixin

GROUP = "population"

logger = logging.getLogger("fluid")


class PopulationBasedTraining(TrialGroupMixin, _RayPBT):
    """Ray's ``PopulationBasedTraining`` with the population as one TrialGroup.

    A trial's budget is its next perturbation: ``last_perturbation_time`` plus the
    perturbation interval, in PBT's ``time_attr`` (fractional intervals included). The
    population is a ``sync`` group.

    Under ``FluidExecutor`` the population perturbs synchronously (Ray's ``synch=True``): a
    member that reached its perturbation pauses until every live member has, then all are
    perturbed at once, the upper quantile saved before the lower one clones it. Fluid's plan
    decides which members run and how fast, so without this a member that got ahead could
    clone a donor whose last checkpoint is a perturbation behind and run those iterations
    again; plain Tune's asynchronous PBT has the same race, made rarer or more frequent by
    which members happen to run. Synchronously, every exploit clones a donor at the very
    iteration the exploiting member reached, and no iteration is run twice. Outside Fluid the
    user's ``synch`` setting is kept.
    """

    def _declare(self, trial: Trial, result: dict | None = None) -> None:
        state = self._trial_state[trial]
        self.new_trial_group(
            [trial], state.last_perturbation_time + self._perturbation_interval, GROUP,
            time_attr=self._time_attr, progress={trial.trial_id: result} if result else None,
            sync=True,
        )

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        if self._fluid_executor is not None and not self._synch:
            self._synch = True
            logger.info("Fluid: PBT perturbs the population synchronously under FluidExecutor "
                        "(synch=True), so that exploits clone donors at the same iteration")
        super().on_trial_add(tune_controller, trial)
        self._declare(trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        if trial in self._trial_state:
            self._declare(trial, result)
        return action
