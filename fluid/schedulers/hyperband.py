"""HyperBand, HyperBandForBOHB and SyncBOHB with TrialGroups at every rung."""

from __future__ import annotations

from typing import Any, NamedTuple

from ray.tune.experiment import Trial
from ray.tune.schedulers import HyperBandForBOHB as _RayHyperBandForBOHB
from ray.tune.schedulers import HyperBandScheduler as _RayHyperBandScheduler
from ray.tune.schedulers import TrialScheduler

from fluid.tune import _ray_compat as compat
from fluid.tune._group import TrialGroupMixin


class RungGroup(NamedTuple):
    """One rung's TrialGroup: the arguments of ``new_trial_group``."""

    trials: list[Trial]
    until: float
    name: str
    priority: int


class RungGroups:
    """The TrialGroups of a HyperBand scheduler's rungs, as values its scheduler declares:
    a bracket's first rung as trials arrive, every rung's survivors after it is halved.

    A rung's group is named by the bracket's index among those this object has seen
    (numbered as they are first seen) and the rung's milestone ``r``; ``FluidExecutor`` joins
    groups of the same name, so the name must be unique among live brackets and must not depend
    on anything outside the scheduler (an ``id()``-based name would do both wrong).

    A rung's survivors carry the rung's index as their ``priority`` (the first rung 0): they
    are what the next rung waits on, so Fluid packs them only where packing is measured free
    (``Tunables.priority_alpha``).
    """

    def __init__(self) -> None:
        self._bracket_index: dict[Any, int] = {}
        self._rung_index: dict[Any, int] = {}

    def _label(self, bracket: Any) -> str:
        index = self._bracket_index.setdefault(bracket, len(self._bracket_index))
        return f"bracket {index} r={compat.bracket_milestone(bracket)}"

    def first_rung(self, bracket: Any, trial: Trial) -> RungGroup:
        """The group ``trial`` joins on arrival: its bracket's first rung."""
        return RungGroup([trial], compat.bracket_milestone(bracket), self._label(bracket), 0)

    def survivors(self, bracket: Any) -> RungGroup | None:
        """After ``bracket``'s rung was halved: the trials that go on together to its next
        milestone (``None`` when none does)."""
        trials = [t for t in bracket.current_trials()
                  if t.status not in (Trial.TERMINATED, Trial.ERROR)
                  and bracket.continue_trial(t)]
        rung = self._rung_index[bracket] = self._rung_index.get(bracket, 0) + 1
        if not trials:
            return None
        return RungGroup(trials, compat.bracket_milestone(bracket), self._label(bracket), rung)


class _DeclaresRungs(TrialGroupMixin, compat.RungHalving):
    """Ray's HyperBand hooks, each declaring the group its ``rung_groups`` gives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rung_groups = RungGroups()

    def _declare(self, group: RungGroup) -> None:
        self.new_trial_group(group.trials, group.until, group.name,
                             time_attr=compat.time_attr(self), priority=group.priority)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        self._declare(self.rung_groups.first_rung(compat.hyperband_bracket(self, trial), trial))

    def rung_halved(self, bracket: Any) -> None:
        """A rung was halved: its survivors go on together, to the next milestone."""
        group = self.rung_groups.survivors(bracket)
        if group is not None:
            self._declare(group)


class HyperBandScheduler(_DeclaresRungs, _RayHyperBandScheduler):
    """Ray's ``HyperBandScheduler`` (synchronous successive halving) with TrialGroups."""


class HyperBandForBOHB(_DeclaresRungs, _RayHyperBandForBOHB):
    """Ray's ``HyperBandForBOHB`` (semi-asynchronous) with TrialGroups; use with ``TuneBOHB``."""


class SyncBOHB(_DeclaresRungs, _RayHyperBandForBOHB):
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
