"""HyperBand, HyperBandForBOHB and SyncBOHB with TrialGroups at every rung."""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import HyperBandForBOHB as _RayHyperBandForBOHB
from ray.tune.schedulers import HyperBandScheduler as _RayHyperBandScheduler
from ray.tune.schedulers import TrialScheduler

from fluid.tune import _ray_compat as compat
from fluid.tune._group import TrialGroupMixin


class _RungGroups(TrialGroupMixin, compat.RungHalving):
    """Declares a bracket's first rung as trials arrive and every rung's survivors after it.

    A rung's group is named by the bracket's index in this scheduler (brackets are numbered
    as they are first seen) and the rung's milestone ``r``; ``FluidExecutor`` joins groups of
    the same name, so the name must be unique among live brackets and must not depend on
    anything outside the scheduler (an ``id()``-based name did both wrong).

    A rung's survivors carry the rung's index as their ``priority`` (the first rung 0): they
    are what the next rung waits on, so Fluid never packs them.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._bracket_index: dict[Any, int] = {}
        self._rung_index: dict[Any, int] = {}

    def _bracket_label(self, bracket: Any) -> str:
        index = self._bracket_index.setdefault(bracket, len(self._bracket_index))
        return f"bracket {index} r={compat.bracket_milestone(bracket)}"

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        bracket = compat.hyperband_bracket(self, trial)
        self.new_trial_group([trial], compat.bracket_milestone(bracket),
                             self._bracket_label(bracket), time_attr=compat.time_attr(self))

    def rung_halved(self, bracket: Any) -> None:
        """A rung was halved: its survivors go on together, to the next milestone."""
        survivors = [
            t
            for t in bracket.current_trials()
            if t.status not in (Trial.TERMINATED, Trial.ERROR) and bracket.continue_trial(t)
        ]
        rung = self._rung_index[bracket] = self._rung_index.get(bracket, 0) + 1
        if survivors:
            self.new_trial_group(survivors, compat.bracket_milestone(bracket),
                                 self._bracket_label(bracket), time_attr=compat.time_attr(self),
                                 priority=rung)


class HyperBandScheduler(_RungGroups, _RayHyperBandScheduler):
    """Ray's ``HyperBandScheduler`` (synchronous successive halving) with TrialGroups."""


class HyperBandForBOHB(_RungGroups, _RayHyperBandForBOHB):
    """Ray's ``HyperBandForBOHB`` (semi-asynchronous) with TrialGroups; use with ``TuneBOHB``."""


class SyncBOHB(_RungGroups, _RayHyperBandForBOHB):
    """Synchronous BOHB: every rung waits for all its trials; configs from BOHB's model.

    Ray's ``HyperBandForBOHB`` pauses trials until their bracket is *filled* and, to avoid
    waiting forever, halves any bracket whenever no trial runs, so rungs are cut early and at
    times that depend on the cluster. ``SyncBOHB`` keeps BOHB's bracket filling and searcher
    hand-shake (``on_pause``/``on_unpause``) but halves a rung exactly when all its live trials
    reached the milestone, like the synchronous ``HyperBandScheduler``.
    Use with ``ray.tune.search.bohb.TuneBOHB``.
    """

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        result["hyperband_info"] = {}
        bracket = compat.hyperband_bracket(self, trial)
        bracket.update_trial_stats(trial, result)
        if bracket.continue_trial(trial):
            return TrialScheduler.CONTINUE
        result["hyperband_info"]["budget"] = compat.bracket_milestone(bracket)
        action = self.process_bracket(tune_controller, bracket)
        if action == TrialScheduler.PAUSE:
            tune_controller.search_alg.searcher.on_pause(trial.trial_id)
        return action

    def choose_trial_to_run(self, tune_controller: Any, allow_recurse: bool = True) -> Trial | None:
        return _RayHyperBandScheduler.choose_trial_to_run(self, tune_controller)
