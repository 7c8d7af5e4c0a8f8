"""``from fluid import tune``: Ray Tune, with Fluid's ``run`` and ``FluidExecutor``.

Everything of ``ray.tune`` is here under the same names, so a script changes one import::

    from fluid import tune
    tune.run(train, config=..., trial_executor=tune.FluidExecutor())

``run`` accepts ``trial_executor=FluidExecutor(...)`` (the argument Ray removed in 2.7) and
combines it with ``scheduler=``. ``ray.tune.Tuner`` works too:
``TuneConfig(scheduler=FluidExecutor(base_scheduler))``.
"""

from ray.tune import *  # noqa: F403  (this module is ray.tune plus Fluid)
from ray.tune import __all__ as _ray_tune_all

from fluid.tune import _ray_versions  # noqa: F401  (refuses an unsupported Ray)
from fluid.tune._executor import FluidExecutor
from fluid.tune._group import TrialGroup, TrialGroupMixin
from fluid.tune._options import FluidConfigError
from fluid.tune._placement_groups import ElasticTrainable, describe, shape_for, width_of
from fluid.tune._resources import RayResourceView, ResourceView
from fluid.tune._run import run

__all__ = [
    *[name for name in _ray_tune_all if name != "run"],
    "ElasticTrainable",
    "FluidConfigError",
    "FluidExecutor",
    "RayResourceView",
    "ResourceView",
    "TrialGroup",
    "TrialGroupMixin",
    "describe",
    "run",
    "shape_for",
    "width_of",
]
