"""The Ray versions Fluid supports, and each difference between them as a gate.

Importing this module (and so ``fluid.tune``) with a Ray outside ``SUPPORTED_RAY`` raises
``ImportError`` naming the supported range. Within it, each difference between Ray releases
that Fluid meets is one gate here (``since``), with the release that brought it:

* ``TRAIN_V2_DEFAULT``: Ray Train V2 is the default (before: ``RAY_TRAIN_V2_ENABLED=1``);
* ``TRAIN_ELASTIC``: Ray Train's ``ScalingConfig(num_workers=(least, most))``;
* ``SIMULATED_RAY``: the releases whose Tune controller ``fluid.sim`` reproduces;
* ``SESSION_NAME``: ``RuntimeContext.get_session_name`` (``fluid.gpu.mps`` names its
  directories after it, else after the head node);
* ``TUNE_BOHB_CONFIGSPACE_1``: Ray's ``TuneBOHB`` speaks ConfigSpace 1.x (before: 0.x);
* ``GCS_ACCESSOR``: ``GlobalState._connect_and_get_accessor`` (before: ``_check_connected``).

``tests/tune/test_ray_versions.py`` checks each gate against the installed Ray.
"""

from __future__ import annotations

import ray
from packaging.specifiers import SpecifierSet
from packaging.version import Version

#: The Ray releases Fluid runs on: every minor release from 2.50 to 2.60. pyproject.toml pins
#: the same range (``tests/tune/test_ray_compat.py`` checks that they agree); the whole suite
#: runs on the newest, the Tune, Train and scheduler tests also on the oldest (``.ci/run``).
SUPPORTED_RAY = ">=2.50,<2.61"
#: Ray Train V2 (trainers whose workers get a placement group of their own) is the default.
TRAIN_V2_DEFAULT = "2.51"
#: Ray Train takes ``num_workers=(least, most)`` and resizes its worker group itself.
TRAIN_ELASTIC = "2.55"
#: ``ray.get_runtime_context().get_session_name()`` exists.
SESSION_NAME = "2.54"
#: Ray's ``TuneBOHB`` builds ConfigSpace 1.x spaces. Before, it needs ConfigSpace 0.x, which
#: does not load beside numpy 2 (what current pyarrow and pandas need): no TuneBOHB there.
TUNE_BOHB_CONFIGSPACE_1 = "2.56"
#: Ray's GCS tables are read through ``GlobalState._connect_and_get_accessor()``.
GCS_ACCESSOR = "2.52"
#: The Tune controllers ``fluid.sim`` reproduces: from 2.57 a model-based searcher wrapped in
#: a ``ConcurrencyLimiter`` may have that many trials pending (``_get_max_pending_trials``),
#: before it one.
SIMULATED_RAY = ">=2.57,<2.61"


def check_ray_version(version: str | None = None) -> None:
    """Raise ``ImportError`` unless ``version`` (default: the installed Ray) is supported."""
    version = ray.__version__ if version is None else version
    if Version(version) not in SpecifierSet(SUPPORTED_RAY):
        raise ImportError(
            f"fluid.tune supports ray[tune]{SUPPORTED_RAY}, found ray {version}; install a "
            f"supported Ray: pip install 'ray[tune]{SUPPORTED_RAY}'"
        )


check_ray_version()


def since(release: str, version: str | None = None) -> bool:
    """Whether ``version`` (default: the installed Ray) is ``release`` or later."""
    return Version(ray.__version__ if version is None else version) >= Version(release)


def simulator_problem(version: str | None = None) -> str | None:
    """One line saying why ``fluid.sim`` cannot run on this Ray (``None``: it can)."""
    version = ray.__version__ if version is None else version
    if Version(version) in SpecifierSet(SIMULATED_RAY):
        return None
    return (f"the simulator reproduces the Tune controller of ray[tune]{SIMULATED_RAY}, found "
            f"ray {version}; install one: pip install 'ray[tune]{SIMULATED_RAY}'")
