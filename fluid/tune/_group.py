"""The TrialGroup abstraction and the one call algorithm authors add.

A TrialGroup is a set of trials with a training budget each, the unit that Fluid sizes so that
it finishes as soon as possible. A scheduler declares a group where its algorithm creates one:
the trials of a grid, the live trials of a HyperBand rung, a PBT population. With
``TrialGroupMixin`` that is one call::

    class MyScheduler(TrialGroupMixin, FIFOScheduler):
        def on_trial_add(self, tune_controller, trial):
            super().on_trial_add(tune_controller, trial)
            self.new_trial_group([trial], until=10)

Outside Fluid the call does nothing, so an adapted scheduler still runs under plain Tune.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ray.tune.experiment import Trial

if TYPE_CHECKING:
    from fluid.tune._executor import FluidExecutor


@dataclass
class TrialGroup:
    """Trials and, per trial, the ``training_iteration`` its budget runs to.

    Attributes:
        trials: the trials of the group.
        until: ``{trial_id: training_iteration}`` at which each trial's budget ends.
        name: a label for progress output (e.g. ``"bracket 0 rung 1"``).
        sync: the members must stay in step (a PBT population): a member that reached its
            budget waits, paused, until every unfinished member has reached its iteration.
    """

    trials: list[Trial]
    until: dict[str, int] = field(default_factory=dict)
    name: str = ""
    sync: bool = False

    @classmethod
    def of(cls, trials: Iterable[Trial], until: int | Mapping[str, int], name: str = "",
           sync: bool = False) -> TrialGroup:
        """Build a group; ``until`` is one iteration for all or a mapping by trial id."""
        trials = list(trials)
        if isinstance(until, Mapping):
            missing = [t.trial_id for t in trials if t.trial_id not in until]
            if missing:
                raise ValueError(f"until has no budget for trials {missing}")
            budgets = {t.trial_id: int(until[t.trial_id]) for t in trials}
        else:
            budgets = {t.trial_id: int(until) for t in trials}
        bad = {k: v for k, v in budgets.items() if v < 1}
        if bad:
            raise ValueError(f"until must be a training_iteration >= 1, got {bad}")
        return cls(trials, budgets, name, sync)


class TrialGroupMixin:
    """Gives a Tune scheduler ``new_trial_group``, the one call that declares a TrialGroup.

    ``FluidExecutor`` sets ``_fluid_executor`` on the scheduler it wraps.
    """

    _fluid_executor: FluidExecutor | None = None

    def new_trial_group(
        self, trials: Iterable[Trial], until: int | Mapping[str, int], name: str = "",
        sync: bool = False,
    ) -> TrialGroup:
        """Declare that ``trials`` form a TrialGroup, each to run to iteration ``until``;
        ``sync``: its members must stay in step (see ``TrialGroup``)."""
        group = TrialGroup.of(trials, until, name, sync)
        if self._fluid_executor is not None:
            self._fluid_executor.add_group(group)
        return group
