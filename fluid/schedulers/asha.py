"""ASHA with a rolling TrialGroup whose budgets are each trial's next rung."""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler as _RayASHAScheduler
from ray.tune.schedulers import TrialScheduler

from fluid.tune import _ray_compat as compat
from fluid.tune._group import TrialGroupMixin

GROUP = "asha"


class ASHAScheduler(TrialGroupMixin, _RayASHAScheduler):
    """Ray's ``ASHAScheduler`` (async successive halving) with one rolling TrialGroup.

    ASHA has no iteration boundary, so its group is the trials admitted now; a trial's budget
    is its next rung milestone (``max_t`` past the last), refreshed as it passes each rung,
    in ASHA's ``time_attr`` (fractional milestones included). Its ``priority`` is the number of
    rungs it was promoted past: Fluid packs a promoted trial only where packing is measured
    free (``Tunables.priority_alpha``).
    """

    def _declare(self, trial: Trial, progress: float, result: dict | None = None) -> None:
        """The trial's budget: the first milestone past ``progress`` (``max_t`` past the last);
        none for a trial ASHA no longer tracks (completed or removed: Ray continues it)."""
        rungs = compat.asha_rungs(self, trial)
        if rungs is None:
            return
        milestones, max_t = rungs
        ahead = [m for m in milestones if m > progress]
        passed = sum(1 for m in milestones if 0 < m <= progress)
        self.new_trial_group([trial], min(ahead) if ahead else max_t, GROUP,
                             time_attr=compat.time_attr(self),
                             progress={trial.trial_id: result} if result else None,
                             priority=passed)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        self._declare(trial, float(trial.last_result.get(compat.time_attr(self), 0) or 0))

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.CONTINUE and compat.time_attr(self) in result:
            self._declare(trial, float(result[compat.time_attr(self)]), result)
        return action
