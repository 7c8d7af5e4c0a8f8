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
    is its next rung milestone (``max_t`` past the last), refreshed as it passes each rung,
    in ASHA's ``time_attr`` (fractional milestones included). Its ``priority`` is the number of
    rungs it was promoted past: Fluid never packs a promoted trial.
    """

    def _next_milestone(self, trial: Trial, progress: float) -> float | None:
        """The first milestone past ``progress``; ``None`` for a trial ASHA does not track."""
        bracket = self._trial_info.get(trial.trial_id)
        if bracket is None:  # completed or removed (Ray continues such trials): no budget
            return None
        ahead = [m for m, _ in bracket._rungs if m > progress]
        return min(ahead) if ahead else self._max_t

    def _declare(self, trial: Trial, progress: float, result: dict | None = None) -> None:
        until = self._next_milestone(trial, progress)
        if until is not None:
            bracket = self._trial_info[trial.trial_id]
            passed = sum(1 for m, _ in bracket._rungs if 0 < m <= progress)
            self.new_trial_group([trial], until, GROUP, time_attr=self._time_attr,
                                 progress={trial.trial_id: result} if result else None,
                                 priority=passed)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        self._declare(trial, float(trial.last_result.get(self._time_attr, 0) or 0))

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.CONTINUE and self._time_attr in result:
            self._declare(trial, float(result[self._time_attr]), result)
        return action
