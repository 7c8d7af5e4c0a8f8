"""Tune's algorithms with the one TrialGroup call each (the paper's adapted algorithms).

Each class is a thin subclass of Ray's own and behaves exactly like it; the only addition is
where the algorithm forms a group of trials, it says so (``new_trial_group``), so that
``FluidExecutor`` sizes that group as a whole. Outside Fluid they are Ray's schedulers.

* ``HyperBandScheduler``: a bracket's trials up to its first milestone; at every rung, the
  survivors up to the next milestone.
* ``HyperBandForBOHB``: the same, with Ray's semi-asynchronous BOHB bracket handling.
* ``SyncBOHB``: HyperBand brackets processed synchronously with BOHB's model (use with
  ``TuneBOHB``), as in the paper; Ray has only the semi-asynchronous variant.
* ``ASHAScheduler``: a rolling group; each trial's budget is its next rung.
* ``PopulationBasedTraining``: the population; each trial's budget is its next perturbation.

Grid/random search (``BasicVariantGenerator``) and ``HyperOptSearch`` need no change: their
trials form one rolling group with budgets from the stop criteria.
"""

from fluid.schedulers.asha import ASHAScheduler
from fluid.schedulers.hyperband import HyperBandForBOHB, HyperBandScheduler, SyncBOHB
from fluid.schedulers.pbt import PopulationBasedTraining

__all__ = [
    "ASHAScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "PopulationBasedTraining",
    "SyncBOHB",
]
