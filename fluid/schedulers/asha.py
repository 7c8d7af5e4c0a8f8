"""ASHA with a rolling TrialGroup whose budgets are each trial's next rung."""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler as _RayASHAScheduler
from ray.tune.schedulers import TrialScheduler

from fluid.tune._group import TrialGroupMixin

GROUP = "asha"


class ASHAScheduler(TrialGroupMixin, _RayASHAScheduler):
    """Ray's ``ASHAScheduler`` (async successive halving) with one rolling TrialGroup.

    ASHA has no iteration boundary, so its group is the trials admitted now; a trial's budget
    is its next rung milestone (``max_t`` past the last), refreshed as it passes each rung.
    """

    def _next_milestone(self, trial: Trial, iteration: int) -> int:
        bracket = self._trial_info[trial.trial_id]
        ahead = [m for m, _ in bracket._rungs if m > iteration]
        return int(min(ahead)) if ahead else int(self._max_t)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        done = int(trial.last_result.get(self._time_attr, 0) or 0)
        self.new_trial_group([trial], self._next_milestone(trial, done), GROUP)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.CONTINUE and self._time_attr in result:
            until = self._next_milestone(trial, int(result[self._time_attr]))
            self.new_trial_group([trial], until, GROUP)
        return action
